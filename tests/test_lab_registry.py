"""
The lab's one registry (microgpt/lab/registry.py): a sandbox declared there is a command, a
route and a page with nothing else to edit, and the command line and the API accept the same ranges.
"""

import sys
import types

import pytest

from helpers import bench_script, live_server, request
from microgpt.edge.errors import UserError
from microgpt.lab import registry, serve
from microgpt.lab.__main__ import flag_of, main

ECHO = registry.Sandbox(
    'echo', 'Echo', help="say a word a few times", model=None, module='lab_test_echo',
    params=(registry.Param('word', str, required=True, positional=True, metavar='WORD', help="what to say"),
            registry.Param('times', int, 2, 1, 5, help="how many times (default 2)"),
            registry.Param('loud', bool, False, help="in capitals")))


def echo_module():
    """The made-up sandbox's module: the two functions of the contract."""
    m = types.ModuleType('lab_test_echo')
    m.compute = lambda word, times=2, loud=False: {'words': [word.upper() if loud else word] * times}
    m.render = lambda d: ' '.join(d['words'])
    return m


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setitem(sys.modules, 'lab_test_echo', echo_module())
    monkeypatch.setattr(registry, 'SANDBOXES', registry.SANDBOXES + [ECHO])
    return ECHO


def test_a_sandbox_added_to_the_registry_is_a_command(echo, capsys):
    assert main(['echo', 'hi', '--times', '3', '--loud']) == 0
    assert capsys.readouterr().out == 'HI HI HI\n'
    with pytest.raises(SystemExit):
        main(['echo', '--help'])
    assert 'how many times (default 2); an integer from 1 to 5' in ' '.join(capsys.readouterr().out.split())


def test_a_sandbox_added_to_the_registry_is_a_route_a_page_and_its_models_facts(echo, tiny_ckpt, names_file,
                                                                               tmp_path, monkeypatch):
    """The made-up `about` declares what its page knows of each checkpoint in its entry alone
    (the Step page's numpy-first rule was once written in api.py), and the listing follows."""
    module = types.ModuleType('lab_test_about')
    module.compute = lambda model, ckpt=None: {}
    monkeypatch.setitem(sys.modules, 'lab_test_about', module)
    made_up = registry.Sandbox('about', 'About', help="a page that knows the width", module='lab_test_about',
                               about_model=lambda config: {'about_width': config.n_embd})
    monkeypatch.setattr(registry, 'SANDBOXES', registry.SANDBOXES + [made_up])
    with live_server(tiny_ckpt, tmp_path / 'runs', names_file) as server:
        status, got, _ = request(server, 'POST', '/api/echo', {'word': 'hi', 'times': 3})
        assert status == 200 and got == {'words': ['hi'] * 3}  # a Param's range: the test of the same range below
        config = request(server, 'GET', '/api/config')[1]  # what web/lab.js draws the navigation from
    assert {'name': 'echo', 'title': 'Echo'} in config['pages'] and config['checkpoints'][0]['about_width'] == 8
    pages, static, api = serve.routes()
    assert pages['/echo'] == 'echo.html' and static['/static/echo.js'] == 'echo.js'
    assert api['/api/echo'] == ('POST', 'sandbox', 'echo')


def test_without_the_entry_there_is_no_command_and_no_route(server, capsys):
    """Negative control: the same requests without the registry line."""
    with pytest.raises(SystemExit):
        main(['echo', 'hi'])
    assert "invalid choice: 'echo'" in capsys.readouterr().err
    assert request(server, 'POST', '/api/echo', {'word': 'hi'})[0] == 404
    assert 'echo' not in [p['name'] for p in request(server, 'GET', '/api/config')[1]['pages']]


def numeric_params():
    for s in registry.SANDBOXES:
        for p in s.params:
            if p.kind in (int, float) and p.cli and p.web and s.page:
                yield pytest.param(s, p, id=f'{s.name}-{p.name}')


def cli_argv(s, p, value):
    """A command line for sandbox s with parameter p at `value` (its positionals filled in)."""
    logfile = ['model.log.jsonl'] if s.model == 'log' else []  # the log sandbox's positional
    return [s.name] + ['anna' for q in s.params if q.positional and q.required] + logfile + [flag_of(p), repr(value)]


@pytest.mark.parametrize('s, p', list(numeric_params()))
def test_the_command_line_and_the_api_accept_the_same_range(s, p, capsys):
    """Just outside each end of every shared numeric parameter: refused by both. At each end
    itself: accepted by both (checked by the parser and the API's reader, before any model)."""
    from microgpt.lab import api
    from microgpt.lab.__main__ import parse_args
    step = 1 if p.kind is int else max(abs(p.high), 1) * 1e-6
    outside = [p.high + step, p.low if p.above else p.low - step]
    inside = [p.high] + ([] if p.above else [p.low])
    as_json = (lambda v: [v]) if p.many else (lambda v: v)
    for value in outside:
        with pytest.raises(SystemExit):
            parse_args(cli_argv(s, p, value))
        assert 'out of range' in capsys.readouterr().err
        with pytest.raises(api.ApiError) as e:
            api.read_param({p.name: as_json(value)}, p)
        assert e.value.status == 400 and p.range_text() in str(e.value)
    for value in inside:
        assert getattr(parse_args(cli_argv(s, p, value)), p.name) == as_json(value)
        assert api.read_param({p.name: as_json(value)}, p) == as_json(value)


def test_top_k_is_capped_by_the_vocabulary_on_both_sides(server, tiny_ckpt, capsys):
    from microgpt.lab.loading import load
    vocab_size = load(tiny_ckpt).model.config.vocab_size
    with pytest.raises(UserError, match=f"--top-k is {vocab_size + 1}, but this model's vocab_size is {vocab_size}"):
        main(['sampling', '--ckpt', tiny_ckpt, '--top-k', str(vocab_size + 1), '--num', '1'])
    status, got, _ = request(server, 'POST', '/api/sampling', {'top_k': vocab_size + 1, 'num': 1})
    assert status == 400 and got['error'].startswith(f"'top_k' is {vocab_size + 1}, but this model's vocab_size")
    assert request(server, 'POST', '/api/sampling', {'top_k': vocab_size, 'num': 1})[0] == 200


def test_every_page_has_its_files(server):
    """Each page the registry lists is served from web/NAME.html (in web/frame.html) and
    web/NAME.js, and names its page, so the browser tests' list (registry.pages()) is every page there is."""
    for name, _ in registry.pages():
        html = request(server, 'GET', f'/{name}')[2].decode('utf-8')
        assert f'data-page="{name}"' in html and f'/static/{name}.js' in html and '<main>' in html
        assert request(server, 'GET', f'/static/{name}.js')[0] == 200
    for path in ('/', '/static/lab.js', '/favicon.ico'):  # the front page, and what every page shares
        status, _, raw = request(server, 'GET', path)
        assert status == 200 and len(raw) > 100


def test_every_page_is_timed_or_says_why_not():
    """bench/lab_speed.py's pages are the registry's: each has its inputs, or its reason."""
    bench = bench_script('lab_speed')
    names = [name for name, _ in registry.pages()]
    assert sorted(names) == sorted([*bench.INPUTS, *bench.UNTIMED])
    assert not set(bench.INPUTS) & set(bench.UNTIMED)
    assert {step[0] for step in bench.steps()} == set(bench.INPUTS)


def test_the_packages_examples_name_every_command():
    import re
    import microgpt.lab
    shown = re.findall(r'python -m microgpt\.lab (\w+)', microgpt.lab.__doc__)
    assert shown == [s.name for s in registry.SANDBOXES] + ['serve', 'exercises']


def test_every_help_shows_the_declared_default():
    """A sandbox's --help states each parameter's declared default, which no help text retypes."""
    from microgpt.lab.__main__ import parse_args
    for s in registry.SANDBOXES:
        for p in s.params:
            shown = p.shown_default()
            if shown is not None:
                assert p.help_text().endswith(f"(default {shown})"), (s.name, p.name)
                assert '(default' not in p.help, (s.name, p.name, p.help)
