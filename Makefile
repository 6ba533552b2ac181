# Two commands a newcomer needs: `make run` and `make test`. Both create the virtual environment
# in .venv on first use and reuse it afterwards; it is rebuilt only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: run test test-lesson notebooks bench screenshots clean

# train.py's own closing samples are skipped: sample.py prints 20 names from the saved checkpoint.
# --force: a second `make run` trains afresh over the first one's out/model.json, as asked.
run: $(VENV)/.installed
	$(PY) train.py --num-samples 0 --force
	$(PY) sample.py --num 20

# -n 2: two pytest workers (pytest-xdist), each taking whole files (their module-wide servers stay
# shared). A test that needs an extra (PyTorch, matplotlib, the notebooks, Chromium) carries its
# marker and is skipped, saying how to install it, where it is missing (tests/conftest.py).
# PYTHONDONTWRITEBYTECODE= : pytest keeps the test modules it rewrites in __pycache__, where a
# machine that forbids bytecode made every worker rewrite all of them again (9 s each).
test: $(VENV)/.installed-test
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 --dist loadfile

# The lesson's own tests (marked `lesson`: engine, blocks, model, training), after an edit to microgpt/*.py
LESSON_TESTS := $(shell grep -l '^pytestmark = pytest.mark.lesson' tests/test_*.py)
test-lesson: $(VENV)/.installed-test
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -m lesson $(LESSON_TESTS)

# The lessons as Jupyter notebooks (docs/notebooks.md): the notebooks extra installed into .venv
# once; each notebooks/NN_*.py (the source, a jupytext percent script) converted to the .ipynb
# beside it when the source is newer (the .ipynb is git-ignored, and yours to edit until its source
# changes); then JupyterLab, rooted at the checkout, opens the first. Offline once installed.
# JUPYTER_FLAGS: more flags for `jupyter lab` (e.g. --no-browser --port 8890); as root, as in a
# container, JupyterLab refuses to start without --allow-root, so it is added there.
NOTEBOOKS := $(patsubst %.py,%.ipynb,$(sort $(wildcard notebooks/[0-9][0-9]_*.py)))
JUPYTER_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

notebooks: $(NOTEBOOKS) | $(VENV)/.installed-notebooks
	$(VENV)/bin/jupyter lab $(JUPYTER_FLAGS) $(firstword $(NOTEBOOKS))

notebooks/%.ipynb: notebooks/%.py | $(VENV)/.installed-notebooks
	$(VENV)/bin/jupytext --quiet --to ipynb $<

# About five minutes: each script prints measurements side by side, never a verdict. The PyTorch
# peer in text_speed.py needs `pip install -e '.[torch]'` (skipped without it).
bench: $(VENV)/.installed
	$(PY) bench/train_speed.py
	$(PY) bench/inference_speed.py
	$(PY) bench/recipe.py
	$(PY) bench/text_speed.py
	$(PY) bench/init_loss.py
	$(PY) bench/shakespeare.py
	$(PY) bench/lab_speed.py

# The web lab's pages as small PNGs in docs/img/ for the README (needs /usr/bin/chromium); and,
# where README's running-text recipe has left out/shakespeare.safetensors, its model's as lab-text-*.png.
screenshots: $(VENV)/.installed-test
	$(PY) tools/screenshots.py
	if [ -f out/shakespeare.safetensors ]; then $(PY) tools/screenshots.py --ckpt out/shakespeare.safetensors --prefix lab-text; fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# The project is installed in editable mode, so edits to the source take effect without reinstalling.
$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(VENV)/.installed $@

$(VENV)/.installed-notebooks: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[notebooks]'
	touch $(VENV)/.installed $@

clean:
	rm -rf $(VENV) out *.egg-info
