"""Runs only in the judging process, never beside student code: behaviours, inputs, references, messages.

Every verdict is decided here, from plain data the student's process answered and values this
process computes itself (torch's own GradScaler, a reference ``amp_step``).
"""
