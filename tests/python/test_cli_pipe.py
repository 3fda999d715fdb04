"""The package's ``hush`` into a closed pipe (``hush circuit list | head -1``)
ends quietly with status 141, as the Cargo-built binary does, not as an
internal error."""

import subprocess
import sys


def test_output_into_a_closed_pipe_is_status_141_not_an_internal_error():
    code = "import sys, hush._cli; sys.exit(hush._cli.main(['hush', 'circuit', 'list']))"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before the first line (as `head -0`): every write fails
    err = p.stderr.read().decode()
    rc = p.wait(timeout=60)
    assert rc == 141, (rc, err)
    assert "internal error" not in err and "panicked" not in err, err
