"""Autograder for the mixed-precision (AMP) assignment.  See README.md."""
