"""Runs only in the student's process: the request loop (:mod:`.serve`) and what it removes first (:mod:`.absence`).

Nothing here decides a point: whatever the student's code changes in this process can only change
the answers it sends, which the judge checks against effects it recomputes itself.
"""
