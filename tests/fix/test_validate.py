"""Validation before a change is written: the schema version chosen, and a change that does
not validate (or apply) is dropped with the reason on its findings."""

from __future__ import annotations

import pytest

from gpuaudit.fix.changes import key
from gpuaudit.fix.plans import plan
from gpuaudit.fix.validate import Invalid, check, schema_version
from tests.fix.conftest import context, lists, quota


def test_the_schema_is_the_clusters_version_or_the_nearest_or_the_newest() -> None:
    assert schema_version("v1.31.4-gke.1200") == (
        "1.31",
        "Kubernetes 1.31, the cluster's version (v1.31.4-gke.1200)",
    )
    low, why = schema_version("v1.20.2")
    assert low == "1.25" and "nearest" in why
    newest, why = schema_version("")
    assert newest == "1.37" and "does not record the cluster's version" in why


def test_an_object_without_a_required_field_does_not_validate() -> None:
    with pytest.raises(Invalid, match="'selector' is a required property"):
        check({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
               "spec": {"replicas": 0}}, "1.34")  # fmt: skip
    with pytest.raises(Invalid, match="no schema for Widget"):
        check({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}}, "1.34")


def test_a_change_that_would_not_validate_is_not_written_and_says_why() -> None:
    kube = lists()
    group = kube["kueue_clusterqueues"][0]["items"][0]["spec"]["resourceGroups"][1]
    del group["coveredResources"]  # the CRD requires it
    ctx = context(kube=kube)
    f = quota(
        "idle_quota", system="Kueue", queue="team-a", flavor="h100",
        resource="nvidia.com/gpu", recommended_quota=6.0,
    )  # fmt: skip
    got = plan([f], ctx.inv, "USD")
    assert got.changes == ()
    reason = got.fixes[key(f)].reason
    assert reason.startswith("the change was not written: it does not validate against the schema")
    assert "'coveredResources' is a required property" in reason
