"""Platform files as SimGrid 3.32 (real Batsim 4.2.1's) reads them, side by side with the
embedded simulator: what its parser accepts the embedded simulator runs, and what it
refuses the embedded simulator names (``real_batsim_refusals``: `timewarp simulate
--batsim` stops before starting; `timewarp sim` notes it and runs)."""

from __future__ import annotations

import pytest
from realbatsim import FixedScenario, batsim_or_skip, fcfs_decider, run_embedded, run_real

from simulator.platform import load_platform, real_batsim_refusals

pytestmark = pytest.mark.batsim

DECL = '<?xml version="1.0"?>'
DTD = '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">'
BODY = (
    '<platform version="4.1"><zone id="z" routing="Full"><host id="master_host" '
    'speed="1Gf"/><host id="n0" speed="1Gf"/></zone></platform>'
)
WORKLOAD = {
    "nb_res": 1,
    "jobs": [{"id": "1", "subtime": 0, "res": 1, "profile": "a"}],
    "profiles": {"a": {"type": "delay", "delay": 10}},
}

# name: (file text, whether SimGrid 3.32's parser reads it)
PROLOGS = {
    "blank line first": (f"\n{DECL}\n{DTD}\n{BODY}\n", True),
    "spaces and tabs first": (f"  \n\t {DECL}\n{DTD}\n{BODY}\n", True),
    "comment first": (f"<!-- c -->\n{DECL}\n{DTD}\n{BODY}\n", True),
    "no declaration": (f"{DTD}\n{BODY}\n", True),
    "latin-1 declaration": (
        f"<?xml version='1.0' encoding='ISO-8859-1'?>\n{DTD}\n{BODY}\n",
        True,
    ),
    "CRLF": (f"\r\n{DECL}\r\n{DTD}\r\n{BODY}\r\n", True),
    "processing instruction": (f"{DECL}\n<?pi x?>\n{DTD}\n{BODY}\n", True),
    "old gforge DTD, single quotes": (
        f"{DECL}\n<!DOCTYPE platform SYSTEM 'http://simgrid.gforge.inria.fr/simgrid/"
        f"simgrid.dtd'>\n{BODY}\n",
        True,
    ),
    "DTD over lines": (
        f'{DECL}\n<!DOCTYPE   platform\n SYSTEM  "https://simgrid.org/simgrid.dtd"  >\n{BODY}\n',
        True,
    ),
    "no DTD": (f"{DECL}\n{BODY}\n", False),
    "zone without routing": (
        DECL + "\n" + DTD + "\n" + BODY.replace(' routing="Full"', "") + "\n",
        False,
    ),
    "byte-order mark": (f"\ufeff{DECL}\n{DTD}\n{BODY}\n", False),
    "DTD over http": (
        f'{DECL}\n<!DOCTYPE platform SYSTEM "http://simgrid.org/simgrid.dtd">\n{BODY}\n',
        False,
    ),
    "local DTD": (f'{DECL}\n<!DOCTYPE platform SYSTEM "simgrid.dtd">\n{BODY}\n', False),
    "DTD with internal subset": (
        f'{DECL}\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd" '
        f'[ <!ENTITY x "y"> ]>\n{BODY}\n',
        False,
    ),
    "PUBLIC DTD": (
        f'{DECL}\n<!DOCTYPE platform PUBLIC "x" "https://simgrid.org/simgrid.dtd">\n{BODY}\n',
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(PROLOGS))
def test_a_platform_prolog_is_read_as_simgrid_reads_it(tmp_path, name):
    text, simgrid_reads = PROLOGS[name]
    batsim_or_skip()
    sc = FixedScenario(text, [WORKLOAD])
    real_sent, real_end = run_real(sc, 0, tmp_path / "real", decide=fcfs_decider())
    assert (real_end == "SIMULATION_ENDS") is simgrid_reads, real_end
    platform = load_platform(tmp_path / "real" / "platform.xml")  # accepted here in any case
    refusals = real_batsim_refusals(platform)
    assert not refusals if simgrid_reads else len(refusals) == 1, refusals
    ours_sent, ours_end = run_embedded(sc, 0, tmp_path / "ours", decide=fcfs_decider())
    assert ours_end == "SIMULATION_ENDS"
    if simgrid_reads:
        assert len(ours_sent) == len(real_sent)


def test_a_refused_prolog_is_named_with_its_line(tmp_path):
    path = tmp_path / "p.xml"
    path.write_text(PROLOGS["local DTD"][0])
    (text,) = real_batsim_refusals(load_platform(path))
    assert text.startswith(f'{path}:2: <!DOCTYPE platform SYSTEM "simgrid.dtd">')
    assert "Bad declaration" in text
