"""
The web lab's Training page against the command line, on the same model of running text: one run
started through the API of a real `lab serve` and polled every POLL seconds as the page polls it
(so the server's samples after each save count), then one `train.py` run of the same model with
the running-text recipe's flags (docs/training.md), each timed from its start to its end.

    python bench/training_page.py                          # 2 x 64, 600 steps, tiny shakespeare
    python bench/training_page.py --n-layer 4 --n-embd 128 --steps 500 --rounds 2
    python bench/training_page.py --page '{}'              # the server's defaults instead

The page's run gets the model, the steps and what --page adds (default: what the page's
running-text preset adds, PRESET); the rest is the server's defaults. The two runs of a round
alternate in order (the page's first in odd rounds), so that a changing load hits both alike.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from common import REPO_DIR, child_env, shared_data

POLL = 0.4  # seconds between the page's looks at a run (training.js)
PRESET = {'dtype': 'float32', 'eval_every': 300}  # what training.js's running-text preset sends beside the model


def main(argv=None):
    p = argparse.ArgumentParser(description="Time a Training page run beside the same train.py run.")
    p.add_argument('--data', default=shared_data('tinyshakespeare.txt'), help="running text (default tiny shakespeare)")
    p.add_argument('--n-layer', type=int, default=2, help="transformer blocks")
    p.add_argument('--n-embd', type=int, default=64, help="embedding width")
    p.add_argument('--steps', type=int, default=600, help="training steps of each run")
    p.add_argument('--rounds', type=int, default=1, help="page run then command-line run, this many times")
    p.add_argument('--page', default=json.dumps(PRESET), help="JSON fields added to what the page sends "
                   "(default: the running-text preset's)")
    args = p.parse_args(argv)
    if not args.data or not os.path.exists(args.data):
        print("training_page: tinyshakespeare.txt not found (../shared/data/): skipped")
        return 0
    model = dict(n_layer=args.n_layer, n_embd=args.n_embd, n_head=4, block_size=64, batch_size=12, lr=0.004,
                 steps=args.steps)
    body = dict(model, engine='numpy', data_mode='text', **json.loads(args.page))
    env = child_env(PYTHONPATH=REPO_DIR)
    with tempfile.TemporaryDirectory() as tmp:
        start_ckpt = os.path.join(tmp, 'start.json')  # the server needs a checkpoint to show
        subprocess.run([sys.executable, '-m', 'microgpt.train', '--steps', '1', '--num-samples', '0',
                        '--out', start_ckpt], env=env, check=True, capture_output=True, cwd=tmp)
        server = subprocess.Popen([sys.executable, '-m', 'microgpt.lab', 'serve', '--ckpt', start_ckpt, '--port', '0',
                                   '--runs-dir', os.path.join(tmp, 'runs'), '--text', args.data],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp)
        try:
            port = int(server.stdout.readline().split('http://127.0.0.1:')[1].split('/')[0])
            for round_ in range(1, args.rounds + 1):
                load = os.getloadavg()
                cli_out = os.path.join(tmp, f'cli{round_}.safetensors')
                if round_ % 2:  # the order alternates, so that a load that grows or fades hits both alike
                    page, page_said = page_run(port, body)
                    cli, cli_said = command_line_run(args.data, model, cli_out, env)
                else:
                    cli, cli_said = command_line_run(args.data, model, cli_out, env)
                    page, page_said = page_run(port, body)
                print(f"round {round_}: page {page:.1f} s ({page_said}); command line {cli:.1f} s ({cli_said}); "
                      f"page / command line = {page / cli:.2f}; load average {load[0]:.2f} -> "
                      f"{os.getloadavg()[0]:.2f} (2 cores)", flush=True)
        finally:
            server.terminate()
            server.wait(30)
    return 0


def api(port, path, body):
    import http.client
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    conn.request('POST', path, json.dumps(body).encode(), {'Content-Type': 'application/json'})
    answer = json.loads(conn.getresponse().read())
    conn.close()
    return answer


def page_run(port, body):
    """(seconds from the start request to the run's end, what it wrote), polled as the page polls."""
    t0 = time.perf_counter()
    started = api(port, '/api/train/start', body)
    if 'error' in started:
        raise SystemExit(f"the page's run was refused: {started['error']}")
    offset, evaluations, said = 0, 0, []  # (seconds since start, the time left the page showed)
    while True:
        status = api(port, '/api/train/status', {'offset': offset})
        offset = status['offset']
        evaluations += sum('val_loss' in r for r in status['records'])
        if status.get('estimate'):
            said.append((time.perf_counter() - t0, status['estimate']['left']))
        if status['state'] in ('finished', 'stopped', 'failed'):
            break
        time.sleep(POLL)
    seconds = time.perf_counter() - t0
    if status['state'] != 'finished':
        raise SystemExit(f"the page's run {status['state']}: {status.get('error')}")
    told = ''.join(
        f"; at {t:.0f} s: {t + left:.1f} s in all" for t, left in said[len(said) // 4::max(1, len(said) // 4)][:3])
    dtype = started['params'].get('dtype', 'float64 (train.py default)')
    return seconds, f"{len(status['samples'])} samples, {evaluations} evaluations, dtype {dtype}{told}"


def command_line_run(data, model, out, env):
    flags = ['--data-mode', 'text', '--data', data, '--engine', 'numpy', '--dtype', 'float32',
             '--eval-every', '300', '--save-every', '1500', '--num-samples', '0', '--out', out]
    flags += [a for name, value in model.items() for a in (f"--{name.replace('_', '-')}", str(value))]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, '-m', 'microgpt.train', *flags], env=env, check=True, capture_output=True)
    seconds = time.perf_counter() - t0
    with open(out + '.log.jsonl', encoding='utf-8') as f:
        evaluations = sum('val_loss' in line for line in f)
    return seconds, f"{evaluations} evaluations, dtype float32, {os.path.basename(out)}"


if __name__ == '__main__':
    sys.exit(main())
