"""Where a course's platform runs the grader on one submission: each module is one platform's runtime.

A runtime reads the platform's submission folder, grades it through the engine's one door
(:func:`autograder.engine.grader.grade_submission`) and writes the platform's results file, whatever
happens.  Building what a platform is given (a zip, a question folder) is :mod:`autograder.packaging`'s job.
"""
