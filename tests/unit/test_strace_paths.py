"""observe: paths in strace's output are decoded exactly, whatever bytes they hold.

The lines below are real strace 6.1 output (`strace -f -y [-xx] -e trace=openat,rename,write`, pid prefix
removed), captured from a script that created and renamed, in a directory named tōol, files named as below:
a UTF-8 name, bytes that are not UTF-8 and a control byte, a quote and a backslash, a newline, '<' and '>'
(escaped inside strace -y's <path>), a space. A live capture checks the same on this machine's strace.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clirace.checks._observed import summary
from clirace.run import observe
from clirace.run.observe import parse_line, written_paths

pytestmark = pytest.mark.timeout(30)

DIR = "/tmp/stx/t\u014dol"  # tōol
NAMES = [b"plain.json", "t\u014dol.json".encode(), b"bad\xff\x01name", b'q"uote\\back', b"new\nline",
         b"gt>lt<.json", b"sp ace"]
EXPECTED = [os.fsdecode(os.fsencode(DIR) + b"/" + name) for name in NAMES]

DEFAULT = [
    'openat(AT_FDCWD</tmp/stx>, "/tmp/stx/t\\305\\215ol/plain.json", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3</tmp/stx/t\\305\\215ol/plain.json>',
    'rename("/tmp/stx/t\\305\\215ol/plain.json", "/tmp/stx/t\\305\\215ol/plain.json.2") = 0',
    'openat(AT_FDCWD</tmp/stx>, "/tmp/stx/t\\305\\215ol/t\\305\\215ol.json", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3</tmp/stx/t\\305\\215ol/t\\305\\215ol.json>',
    'rename("/tmp/stx/t\\305\\215ol/t\\305\\215ol.json", "/tmp/stx/t\\305\\215ol/t\\305\\215ol.json.2") = 0',
    'openat(AT_FDCWD</tmp/stx>, "/tmp/stx/t\\305\\215ol/bad\\377\\1name", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3</tmp/stx/t\\305\\215ol/bad\\377\\1name>',
    'rename("/tmp/stx/t\\305\\215ol/bad\\377\\1name", "/tmp/stx/t\\305\\215ol/bad\\377\\1name.2") = 0',
    'openat(AT_FDCWD</tmp/stx>, "/tmp/stx/t\\305\\215ol/q\\"uote\\\\back", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3</tmp/stx/t\\305\\215ol/q\\"uote\\\\back>',
    'rename("/tmp/stx/t\\305\\215ol/q\\"uote\\\\back", "/tmp/stx/t\\305\\215ol/q\\"uote\\\\back.2") = 0',
    'openat(AT_FDCWD</tmp/stx>, "/tmp/stx/t\\305\\215ol/new\\nline", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3</tmp/stx/t\\305\\215ol/new\\nline>',
    'rename("/tmp/stx/t\\305\\215ol/new\\nline", "/tmp/stx/t\\305\\215ol/new\\nline.2") = 0',
    'openat(AT_FDCWD</tmp/stx>, "/tmp/stx/t\\305\\215ol/gt>lt<.json", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3</tmp/stx/t\\305\\215ol/gt\\76lt\\74.json>',
    'rename("/tmp/stx/t\\305\\215ol/gt>lt<.json", "/tmp/stx/t\\305\\215ol/gt>lt<.json.2") = 0',
    'openat(AT_FDCWD</tmp/stx>, "/tmp/stx/t\\305\\215ol/sp ace", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3</tmp/stx/t\\305\\215ol/sp ace>',
    'rename("/tmp/stx/t\\305\\215ol/sp ace", "/tmp/stx/t\\305\\215ol/sp ace.2") = 0',
]

HEX = [
    'openat(AT_FDCWD<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78>, "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x70\\x6c\\x61\\x69\\x6e\\x2e\\x6a\\x73\\x6f\\x6e", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x70\\x6c\\x61\\x69\\x6e\\x2e\\x6a\\x73\\x6f\\x6e>',
    'rename("\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x70\\x6c\\x61\\x69\\x6e\\x2e\\x6a\\x73\\x6f\\x6e", "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x70\\x6c\\x61\\x69\\x6e\\x2e\\x6a\\x73\\x6f\\x6e\\x2e\\x32") = 0',
    'openat(AT_FDCWD<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78>, "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2e\\x6a\\x73\\x6f\\x6e", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2e\\x6a\\x73\\x6f\\x6e>',
    'rename("\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2e\\x6a\\x73\\x6f\\x6e", "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2e\\x6a\\x73\\x6f\\x6e\\x2e\\x32") = 0',
    'openat(AT_FDCWD<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78>, "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x62\\x61\\x64\\xff\\x01\\x6e\\x61\\x6d\\x65", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x62\\x61\\x64\\xff\\x01\\x6e\\x61\\x6d\\x65>',
    'rename("\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x62\\x61\\x64\\xff\\x01\\x6e\\x61\\x6d\\x65", "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x62\\x61\\x64\\xff\\x01\\x6e\\x61\\x6d\\x65\\x2e\\x32") = 0',
    'openat(AT_FDCWD<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78>, "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x71\\x22\\x75\\x6f\\x74\\x65\\x5c\\x62\\x61\\x63\\x6b", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x71\\x22\\x75\\x6f\\x74\\x65\\x5c\\x62\\x61\\x63\\x6b>',
    'rename("\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x71\\x22\\x75\\x6f\\x74\\x65\\x5c\\x62\\x61\\x63\\x6b", "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x71\\x22\\x75\\x6f\\x74\\x65\\x5c\\x62\\x61\\x63\\x6b\\x2e\\x32") = 0',
    'openat(AT_FDCWD<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78>, "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x6e\\x65\\x77\\x0a\\x6c\\x69\\x6e\\x65", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x6e\\x65\\x77\\x0a\\x6c\\x69\\x6e\\x65>',
    'rename("\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x6e\\x65\\x77\\x0a\\x6c\\x69\\x6e\\x65", "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x6e\\x65\\x77\\x0a\\x6c\\x69\\x6e\\x65\\x2e\\x32") = 0',
    'openat(AT_FDCWD<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78>, "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x67\\x74\\x3e\\x6c\\x74\\x3c\\x2e\\x6a\\x73\\x6f\\x6e", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x67\\x74\\x3e\\x6c\\x74\\x3c\\x2e\\x6a\\x73\\x6f\\x6e>',
    'rename("\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x67\\x74\\x3e\\x6c\\x74\\x3c\\x2e\\x6a\\x73\\x6f\\x6e", "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x67\\x74\\x3e\\x6c\\x74\\x3c\\x2e\\x6a\\x73\\x6f\\x6e\\x2e\\x32") = 0',
    'openat(AT_FDCWD<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78>, "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x73\\x70\\x20\\x61\\x63\\x65", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0777) = 3<\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x73\\x70\\x20\\x61\\x63\\x65>',
    'rename("\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x73\\x70\\x20\\x61\\x63\\x65", "\\x2f\\x74\\x6d\\x70\\x2f\\x73\\x74\\x78\\x2f\\x74\\xc5\\x8d\\x6f\\x6c\\x2f\\x73\\x70\\x20\\x61\\x63\\x65\\x2e\\x32") = 0',
]


@pytest.mark.parametrize("lines", [DEFAULT, HEX], ids=["octal-default", "hex-xx"])
def test_paths_decode_to_the_exact_names(lines):
    events = [parse_line(line, "/tmp/stx") for line in lines]
    opens = [e for e in events if e.call == "openat"]
    renames = [e for e in events if e.call == "rename"]
    assert [e.paths for e in opens] == [(path,) for path in EXPECTED]  # from the fd's <path> (strace -y)
    assert [e.paths for e in renames] == [(path, path + ".2") for path in EXPECTED]
    assert written_paths(tuple(events)) == [p for path in EXPECTED for p in (path, path + ".2")]


def test_bytes_that_are_not_utf8_round_trip():
    path = parse_line(DEFAULT[4], "/").paths[0]
    assert os.fsencode(path) == os.fsencode(DIR) + b"/bad\xff\x01name"


def test_the_dirfd_is_decoded_too():
    line = r'openat(AT_FDCWD</tmp/t\305\215ol>, "rel.json", O_RDONLY) = -1 ENOENT (No such file or directory)'
    assert parse_line(line, "/").paths == ("/tmp/t\u014dol/rel.json",)


@pytest.mark.skipif(not observe.available()[0], reason="strace cannot trace here")
@pytest.mark.parametrize("hexa", [False, True], ids=["octal-default", "hex-xx"])
def test_live_trace_of_a_non_ascii_config_directory(tmp_path, hexa):
    config = tmp_path / "t\u014dol" / "config.json"
    config.parent.mkdir()
    script = ("import os\n"
              f"open({str(config) + '.tmp'!r}, 'w').write('{{}}')\n"
              f"os.replace({str(config) + '.tmp'!r}, {str(config)!r})\n")
    prefix = observe.trace_prefix(tmp_path / "trace", "openat,rename,write")
    if hexa:
        prefix.insert(1, "-xx")
    subprocess.run([*prefix, sys.executable, "-S", "-c", script], check=True, cwd=tmp_path)
    events = observe.file_events(tmp_path / "trace", str(tmp_path))
    seen = summary(events, str(tmp_path))
    assert seen.renamed_onto == ["{sandbox}/t\u014dol/config.json"], seen
    assert "{sandbox}/t\u014dol/config.json.tmp" in seen.written
