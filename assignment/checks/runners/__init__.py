"""Scenario runners: plain data in, plain data out, run on both sides of the boundary.

In the student's process they exercise the submission; in the judging process (or its reference
process on a GPU) the same code exercises torch's reference, so both answer in the same shape.
They import only torch and the standard library: the sandbox preloads them before any student code.
"""
