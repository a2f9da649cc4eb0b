"""What every stage may use: errors a user can cause, bounds on outside sizes, the readers of
outside numbers, redaction, progress events, the debug log and the collector pause.
"""
