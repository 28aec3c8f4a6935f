# Mixed-precision homework: one Makefile for instructors, TAs and CI.  `make help` lists targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
OTTER_STAMP := $(VENV)/.otter-installed
OUT ?= out/grade
DIR ?= assignment
EXAMPLES := solutions assignment examples/partially_correct
SUBMISSIONS ?= $(EXAMPLES)
# Feedback and notebook language (en, ko): `make grade AMP_LANGUAGE=ko`, `make autograder AMP_LANGUAGE=ko`,
# `make notebook AMP_LANGUAGE=ko` (not LANG: that is the locale every tool reads).
AMP_LANGUAGE ?= en
export AMP_LANGUAGE

.DEFAULT_GOAL := help
.PHONY: help setup setup-otter test test-all test-busy student diagnosis golden check demo grade autograder prairielearn classroom bench profile bench-batch

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

setup: $(VENV)/.installed ## create .venv with the pinned dependencies

# torch first, the build the machine uses (autograder/torch_install.py: CPU where there is no NVIDIA GPU; it says which).
$(VENV)/.installed: pyproject.toml autograder/torch_install.py
	$(PYTHON) -m venv $(VENV)
	$(PYTHON) autograder/torch_install.py $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[slurm,test]"
	touch $@

# The project's own tests on TEST_JOBS xdist workers, each taking whole modules (tests/conftest.py says which
# tests are slow and which represent a slow suite, and hands the longest modules out first: --no-loadscope-reorder).  Exit status 5 (no test selected, e.g. with PYTEST_ARGS=-k)
# is not a failure.  `-rs` lists every skipped test with its reason (in CI a missing root, setpriv or chromium
# fails instead: tests/conftest.py, skip_unless_ci).
TEST_JOBS ?= 2
PYTEST_ARGS ?=
PYTEST = $(PY) -m pytest tests -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder --durations=15 -rs $(PYTEST_ARGS)

test: setup $(OTTER_STAMP) ## the fast default (goal: 10 min on 2 cores): all but the slow tests, plus a representative part of each slow suite
	$(PYTEST) -m "not slow or representative" || [ $$? -eq 5 ]

test-all: setup $(OTTER_STAMP) ## every test, the slow ones included (what CI runs)
	$(PYTEST) || [ $$? -eq 5 ]

# What it rebuilt, what it left and why, and what in dist/ is now stale: autograder/packaging/student.py.
student: setup $(OTTER_STAMP) ## regenerate from solutions/: assignment/*.py and both notebooks (5 s); the Task-2 effects (+11 s) and the diagnosis tables (+25 s, +1 min; several times that on a busy machine: docs/speed.md) only when their inputs' behaviour changed; says what in dist/ is stale
	$(PY) -m autograder.packaging.student

diagnosis: setup ## rebuild the grader's diagnosis table autograder/hidden/diagnosis.json now, changed or not (committed; about 1 min on a 2-core machine, several on a busy one: docs/speed.md)
	$(PY) -m autograder.diagnosis build --out autograder/hidden/diagnosis.json

# The English feedback the tests hold byte for byte (tests/test_korean_edition.py): graded as the tests grade.
GOLDEN := tests/golden/en
golden: setup ## rewrite tests/golden/en/*.feedback.md from a grading of the bundled examples (only for an intended English change: review the diff)
	rm -rf out/golden
	AMP_DIAGNOSIS=off AMP_LANGUAGE=en $(PY) -m autograder grade $(EXAMPLES) --out out/golden
	for name in $(notdir $(EXAMPLES)); do cp out/golden/$$name/feedback.md $(GOLDEN)/$$name.feedback.md; done
	if git rev-parse --git-dir >/dev/null 2>&1; then git --no-pager diff --stat -- $(GOLDEN); fi

check: setup ## run the public checks on DIR (default: assignment/)
	cd assignment && AMP_SUBMISSION="$(abspath $(DIR))" ../$(PY) -m pytest

demo: setup ## run the underflow demo (stall without scaling, recovery with it)
	$(PY) solutions/underflow_demo.py --plot out/underflow_demo.png

grade: setup ## grade SUBMISSIONS (default: the bundled examples) into OUT
	$(PY) -m autograder grade $(SUBMISSIONS) --out $(OUT)

autograder: setup ## build dist/autograder.zip for Gradescope
	$(PY) -m autograder.packaging.gradescope --out dist/autograder.zip --language $(AMP_LANGUAGE)

# The grading image PrairieLearn pulls (build it from dist/prairielearn/image/ and push it under your name).
PL_IMAGE ?= YOUR-DOCKERHUB-USER/amp-homework-grader:torch2.13.0

prairielearn: setup ## build dist/prairielearn/: the question (external grading) and its image (PL_IMAGE=name names it)
	$(PY) -m autograder.packaging.prairielearn --out dist/prairielearn --image "$(PL_IMAGE)" --language $(AMP_LANGUAGE)

classroom: setup ## build dist/classroom/: the GitHub Classroom template repository (public rows on every push)
	$(PY) -m autograder.packaging.classroom --out dist/classroom --language $(AMP_LANGUAGE)

bench: setup ## time grading one submission against the python+torch floor
	$(PY) benchmarks/grading_speed.py

profile: setup ## where one submission's grading time goes (correct and buggy): calls, reference, hypothesis, pytest
	$(PY) benchmarks/profile_grading.py

bench-batch: setup ## time batch grading (synthetic submissions, --jobs 2) against a naive baseline
	$(PY) benchmarks/batch_speed.py

test-busy: setup $(OTTER_STAMP) ## make test beside a batch grading that runs in a loop (a busy machine)
	$(PY) benchmarks/busy_test.py make test

.PHONY: grade-gpu bench-gpu gpu-check
# DRY=1/true/yes: the CPU dry run; DRY=0/false/no: the real GPU run; unset: $$AMP_GPU_DRY decides (real if unset).
# The value goes to the one parser (assignment/checks/gpu_mode.py): a typo is an error, not a dry run.
DRY_FLAG = $(if $(DRY),--dry "$(DRY)")
GPU_CHECK_OUT = $(if $(filter command line environment,$(origin OUT)),$(OUT),out/gpu-check)
# PY=python3 on the command line: that interpreter as it is, no .venv (a GPU image whose Python already holds a
# CUDA build of torch, often with no package index to install from; the other packages as wheels: docs/gpu.md).
GPU_SETUP = $(if $(filter command line,$(origin PY)),,setup)

grade-gpu: $(GPU_SETUP) ## on a GPU machine: preflight, canary, then the GPU part of SUBMISSIONS into OUT (DRY=1: CPU dry run)
	$(PY) -m autograder grade-gpu $(SUBMISSIONS) --out $(OUT) $(DRY_FLAG)

bench-gpu: $(GPU_SETUP) ## on a GPU machine: fp32 vs fp16+GradScaler vs bf16 (table + out/gpu_bench.png; DRY=1: CPU)
	$(PY) benchmarks/gpu_bench.py --plot out/gpu_bench.png --json out/gpu_bench.json $(DRY_FLAG)

gpu-check: $(GPU_SETUP) ## on a GPU machine: preflight, GPU tests, bench, grade-gpu -> OUT/report.md (DRY=1: CPU dry run)
	$(PY) -m autograder.gpu.check --out $(GPU_CHECK_OUT) $(DRY_FLAG)

.PHONY: otter notebook
# Never silent: the extra is an install of its own (otter-grader and its dependencies, a minute or two).
$(OTTER_STAMP): $(VENV)/.installed pyproject.toml
	@echo "installing the [otter] extra (otter-grader: otter assign builds the notebooks, make otter the zip) into $(VENV):"
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[otter]"
	touch $@

setup-otter: $(OTTER_STAMP) ## install the [otter] extra into .venv (make student, make notebook and make test install it too, saying so)

otter: $(OTTER_STAMP) ## build dist/otter-autograder.zip (otter-grader; otter run -a it SUBMISSION.zip)
	$(PY) -m autograder.packaging.otter_build --out dist/otter-autograder.zip --language $(AMP_LANGUAGE)

notebook: $(OTTER_STAMP) ## rebuild assignment/amp_homework.ipynb with otter assign (after make student; AMP_LANGUAGE=ko: amp_homework.ko.ipynb)
	$(PY) -m autograder.packaging.notebook_build --language $(AMP_LANGUAGE)

.PHONY: mutation mutation-grader example-counts
MUTATION_STAMP := $(VENV)/.mutation-installed
$(MUTATION_STAMP): $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[mutation]"
	touch $@

mutation: $(MUTATION_STAMP) ## mutation score of the hidden suite over solutions/ (cosmic-ray; ~10+ min; not in CI)
	$(PY) mutation/run.py --out out/mutation $(if $(JOBS),--jobs $(JOBS)) $(if $(LIMIT),--limit $(LIMIT))

# PER_FILE=N: mutants sampled from each judge file (default: mutation/grader.toml's); PER_FILE=0: all of them.
mutation-grader: $(MUTATION_STAMP) ## mutation score of the tests over the judge (the grader's own code; a seeded sample; 20-35 min; not in CI)
	$(PY) mutation/run_grader.py --out out/mutation-grader $(if $(PER_FILE),--per-file $(PER_FILE))

example-counts: $(MUTATION_STAMP) ## examples each hidden property test needs to catch the catalogue and a mutant sample (about 1 h on 2 cores; not in CI)
	$(PY) benchmarks/example_counts.py $(if $(JOBS),--jobs $(JOBS))
