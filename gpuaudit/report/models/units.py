"""The base of every report model, and the JSON types their fields share: numbers kept as the
audit gave them or rounded to the places the report gives them, times, and check codes."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema


class ReportModel(BaseModel):
    """A part of the JSON report: frozen, no field it does not declare, each field described by
    the docstring under it (the schema's `description`)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        use_attribute_docstrings=True,
        # A NaN or infinity stays a float through `model_dump(mode="json")`, so that the
        # report's `json.dumps(..., allow_nan=False)` refuses it instead of writing null: a
        # figure that went wrong must never read as a missing one.
        ser_json_inf_nan="constants",
    )


Number = Annotated[float | int, WithJsonSchema({"type": "number"})]
"""A JSON number kept as the audit computed it: an int stays an int (`1`, never `1.0`)."""


def _places(places: int) -> AfterValidator:
    return AfterValidator(lambda value: round(value, places))


Round2 = Annotated[Number, _places(2)]
"""A number rounded to 2 decimal places (GPU-hours, costs)."""
Round4 = Annotated[Number, _places(4)]
"""A number rounded to 4 decimal places (ratios, GPU counts of hourly statistics)."""

Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]
"""A time as RFC 3339 in UTC, to the second: `2026-11-23T00:00:00Z`."""

Code = Annotated[str, Field(pattern=r"^GPU[0-9]{3}$")]
"""A check's stable code: `GPU001`."""
