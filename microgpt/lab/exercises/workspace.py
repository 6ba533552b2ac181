"""
The learner's folder of exercises: made by `start`, read by every other command, and the one
place that writes in it. A workspace is the stub files (catalog.EXERCISES) and
.microgpt-exercises.json: the exercises' version, each exercise's last result and the last hint
level shown. Nothing overwrites a file the learner may have edited: `start` adds only what is
missing, `reset` asks first. A bad folder is one UserError naming the fix.
"""

import datetime
import hashlib
import json
import os

from ...edge.checks import short
from ...edge.errors import UserError
from ...edge.files import parse_json, probe_writable, read_user_file, write_atomic
from . import catalog

MANIFEST = '.microgpt-exercises.json'
DEFAULT_DIR = 'exercises'
COMMAND = 'python -m microgpt.lab exercises'
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # microgpt/


def digest(content):
    """The sha256 of a file's content (bytes) or of the text it would hold."""
    return hashlib.sha256(content.encode('utf-8') if isinstance(content, str) else content).hexdigest()


def shown(path):
    """The folder as the learner would type it: relative to here when below here."""
    rel = os.path.relpath(path)
    return path if rel.startswith('..') else rel


def dir_flag(path):
    """' --dir X' for a command about the workspace at path, '' for the default one."""
    return '' if os.path.abspath(path) == os.path.abspath(DEFAULT_DIR) else f" --dir {shown(path)}"


def inside_package(path):
    real = os.path.realpath(path)
    package = os.path.realpath(PACKAGE_DIR)
    return os.path.commonpath([real, package]) == package


def check_place(path):
    """A path a workspace may live at: not a file, not inside the microgpt package."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{shown(path)} is a file, not a folder: give a folder for the exercises "
                        f"(it is created if missing), e.g. {COMMAND} start {DEFAULT_DIR}")
    if inside_package(path):
        raise UserError(f"{shown(path)} is inside the microgpt package ({shown(PACKAGE_DIR)}): keep your "
                        f"exercises outside it, e.g. {COMMAND} start {DEFAULT_DIR}")


def found(path):
    """The folder a command means: `path`; but where the default folder is not here and this
    folder is itself a workspace (the learner went into it), this folder, not a new one in it."""
    if path == DEFAULT_DIR and not os.path.isdir(path) and os.path.isfile(MANIFEST):
        return os.getcwd()
    return path


class Workspace:
    """An existing workspace, checked: Workspace.open(path)."""

    def __init__(self, path, manifest):
        self.path, self.manifest = os.path.abspath(path), manifest

    # ---- opening
    @classmethod
    def open(cls, path):
        """The workspace at path, or a UserError saying what to do: start it, fix a renamed stub..."""
        path = os.path.abspath(found(path))
        check_place(path)
        if not os.path.isdir(path):
            raise UserError(f"no exercises at {shown(path)}: run `{COMMAND} start {shown(path)}` first")
        manifest = read_manifest(path)
        if manifest is None:
            raise UserError(f"{shown(path)} is not a folder of microgpt's exercises (it has no {MANIFEST}): "
                            f"run `{COMMAND} start {shown(path)}` there, which adds what is missing and "
                            "overwrites nothing")
        check_files(path, missing_ok=False)
        return cls(path, manifest)

    def file(self, number):
        return os.path.join(self.path, catalog.get(number).filename)

    def content(self, number):
        """The exercise file's bytes, read as every file a user hands in is (edge/files.py)."""
        return read_user_file(self.file(number), 'exercise file', f"run `{COMMAND} start {shown(self.path)}`",
                              binary=True)

    def is_stub(self, number):
        return digest(self.content(number)) == digest(catalog.stub_text(number))

    # ---- results
    def results(self):
        """{'N': {status, line, checked, sha256}}: the last result of each exercise checked."""
        return self.manifest.get('results', {})

    def record(self, results):
        """Keep each exercise's last result ({number: result}) for `status` and the web lab; a
        folder that cannot be written loses them, and says so in the returned text."""
        stamp = datetime.datetime.now().isoformat(timespec='seconds')
        kept = self.results()
        for number, result in results.items():
            kept[str(number)] = {'status': result['status'], 'line': result['line'], 'checked': stamp,
                                 'sha256': digest(self.content(number))}
        return self._save('results', kept, 'the results were')

    def edited_since_check(self, number):
        last = self.results().get(str(number))
        return last is not None and last['sha256'] != digest(self.content(number))

    # ---- hints
    def hint_level(self, number):
        """The highest hint level shown for an exercise (0: none yet)."""
        return self.manifest.get('hints', {}).get(str(number), 0)

    def record_hint(self, number, level):
        """Remember that hint `level` of an exercise was shown; '' or the words of why not."""
        kept = dict(self.manifest.get('hints', {}))
        kept[str(number)] = max(level, self.hint_level(number))
        return self._save('hints', kept, 'the hint level was')

    def _save(self, key, value, what):
        """The manifest with `key` set to `value`, written; '' or the words of why it was not."""
        self.manifest[key] = value
        try:
            write_manifest(self.path, self.manifest)
        except UserError as e:
            return f"({what} not saved: {e})"
        return ''

    def reset(self, number):
        write_text(self.file(number), catalog.stub_text(number))  # a WriteError says the file is intact


def read_manifest(path):
    """The folder's record of its exercises, None if it has none; a damaged one, or one of another
    version, is a UserError."""
    file = os.path.join(path, MANIFEST)
    if not os.path.lexists(file):
        return None
    fix = f"delete it and run `{COMMAND} start {shown(path)}` (your exercise files are kept)"
    manifest = parse_json(read_user_file(file, 'record of exercises', fix), shown(file), hint=fix)
    if not isinstance(manifest, dict):
        raise UserError(f"{shown(file)} is damaged: {fix}")
    version = manifest.get('version')
    if version != catalog.VERSION:
        raise UserError(f"{shown(path)} was made by another version of microgpt's exercises (version {short(version)}; "
                        f"this microgpt has version {catalog.VERSION}): start a new folder with "
                        f"`{COMMAND} start NEWDIR` and copy your functions into its files")
    return manifest


def check_files(path, missing_ok):
    """The folder's exercise files are this version's: none renamed, none extra, none missing
    (unless missing_ok: `start` is what adds them)."""
    present = {name for name in os.listdir(path) if catalog.STEM_PATTERN.match(name)}
    wanted = {e.filename for e in catalog.EXERCISES}
    missing = sorted(wanted - present)
    for name in sorted(present - wanted):
        twin = next((m for m in missing if m[:5] == name[:5]), None)
        if twin:
            raise UserError(f"{shown(os.path.join(path, name))} looks like {twin} renamed: rename it back "
                            f"to {twin}, the name this version of the exercises checks")
        first, last = catalog.EXERCISES[0].filename, catalog.EXERCISES[-1].filename
        raise UserError(f"{shown(os.path.join(path, name))} is not one of this version's exercises ({first} .. "
                        f"{last}): move it out of {shown(path)}, or rename it without the exNN_ prefix")
    if missing and not missing_ok:
        raise UserError(f"{shown(os.path.join(path, missing[0]))} is missing"
                        + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else '') +
                        f": run `{COMMAND} start {shown(path)}` to add "
                        f"{'it' if len(missing) == 1 else 'them'} (it overwrites nothing)")
    return missing


def write_text(path, text):
    """path's new content, whole or not at all, with the permissions the file had (edge/files.py)."""
    write_atomic(path, lambda f: f.write(text.encode('utf-8')))


def write_manifest(path, manifest):
    write_text(os.path.join(path, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True) + '\n')


def start(path):
    """Make the workspace at path, or add what it is missing: (the files written, the files kept).
    Every check comes before the first write, so a refused start leaves the folder as it was."""
    path = os.path.abspath(found(path))
    check_place(path)
    manifest, missing = None, [e.filename for e in catalog.EXERCISES]
    if os.path.isdir(path):
        manifest, missing = read_manifest(path), check_files(path, missing_ok=True)
    try:
        os.makedirs(path, exist_ok=True)
        probe_writable(os.path.join(path, MANIFEST))
    except OSError as e:
        raise UserError(f"cannot write in {shown(path)} ({e.strerror}): give a folder you can write to, "
                        f"e.g. {COMMAND} start ~/microgpt-exercises") from None
    for e in catalog.EXERCISES:  # a disk that fills up meanwhile: what was written is whole, and kept
        if e.filename in missing:
            write_text(os.path.join(path, e.filename), catalog.stub_text(e.number))
    write_manifest(path, manifest or {'version': catalog.VERSION, 'results': {}})
    kept = [e.filename for e in catalog.EXERCISES if e.filename not in missing]
    return missing, kept
