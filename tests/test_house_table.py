"""The house table (engine.tables.house_table): what every chapter's tables look like."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from hacn_core.engine.tables import MISSING, format_value, house_table


def _cells(html: str) -> list[list[str]]:
    body = html.split("<tbody>")[1].split("</tbody>")[0]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in body.split("</tr>") if "<td" in row]


def test_values_are_formatted_the_house_way():
    assert format_value(True) == "yes" and format_value(np.False_) == "no"
    assert format_value(846000) == "846,000" and format_value(np.int64(12)) == "12"
    assert format_value(188.667) == "188.7" and format_value(3.0) == "3"
    assert format_value(0.000123456) == "0.0001235" and format_value(math.inf) == "∞"
    assert format_value(None) == MISSING and format_value(float("nan")) == MISSING
    assert format_value(0.12345, ".2%") == "12.35%" and format_value(2, lambda v: f"d={v}") == "d=2"
    # a small negative that rounds to zero shows no minus; a real negative keeps it
    assert [format_value(v, f) for v, f in ((-0.03, "+.1f"), (-0.03, ".1f"), (-0.00001, ".2%"), (-0.4, ".0f"))] == \
        ["+0.0", "0.0", "0.00%", "0"]
    assert format_value(-0.06, "+.1f") == "-0.1" and format_value(-10.0, ".0f") == "-10"


def test_index_becomes_columns_names_labels_and_formats_apply():
    frame = pd.DataFrame({"rule": ["hacn", "gated_plain"], "acc": [0.9123, 0.5], "width": [188.667, 32.0]},
                         ).set_index("rule")
    out = house_table(frame, columns={"acc": "test accuracy (%)", "width": "width (neurons)"},
                      formats={"test accuracy (%)": lambda v: f"{100 * v:.2f}", "width": ".1f"},
                      labels={"rule": {"hacn": "H-ACN", "gated_plain": "Gated PlainNet"}})
    html = str(out.data)
    heads = re.findall(r"<th>(.*?)</th>", html)
    assert heads == ["rule", "test accuracy (%)", "width (neurons)"]  # the index is an ordinary column
    assert _cells(html) == [["H-ACN", "91.23", "188.7"], ["Gated PlainNet", "50.00", "32.0"]]
    assert 'class="num"' in html and "<th></th>" not in html  # numbers right-aligned, no blank index header


def test_missing_cells_need_a_reason_and_show_it():
    frame = pd.DataFrame({"seeds": [3, 1], "std": [0.2, float("nan")]})
    with pytest.raises(ValueError, match="missing_note"):
        house_table(frame)
    html = str(house_table(frame, missing_note="one seed has no spread").data)
    assert _cells(html)[1] == ["1", MISSING] and "one seed has no spread" in html and "NaN" not in html
    with pytest.raises(KeyError, match="columns \\['nope'\\] are not in the table"):
        house_table(frame, columns={"nope": "x"}, missing_note="x")
    with pytest.raises(TypeError, match="DataFrame"):
        house_table([1, 2])


def test_text_is_escaped():
    html = str(house_table(pd.DataFrame({"claim": ["a < b & c"]})).data)
    assert "a &lt; b &amp; c" in html


def test_device_label_names_the_gpu_model_and_tells_cpus_apart_by_cores():
    from hacn_core.engine.tables import device_label

    assert device_label({"device": "cuda: NVIDIA H100 80GB HBM3", "threads": 1}) == "H100"
    assert device_label({"device": "cpu: Intel(R) Xeon(R) Processor (2 cores, 1 torch threads)",
                         "threads": 1}) == "CPU, 2 cores, 1 thread"
    assert device_label({"device": "cpu: Intel(R) Xeon(R) Processor (16 cores, 4 torch threads)",
                         "threads": 4}) == "CPU, 16 cores, 4 threads"
    assert device_label({}) == "not recorded"


def test_long_tokens_break_at_their_punctuation_without_changing_the_text():
    from hacn_core.engine.tables import LONG_TOKEN

    frame = pd.DataFrame({"checked by": ["tests/test_paper_items.py::test_counts", "a short one"],
                          "ln(1/(1-k))/rate": ["x", "y"]})
    html = str(house_table(frame).data)
    assert "tests/<wbr>test_<wbr>paper_<wbr>items.<wbr>py::<wbr>test_<wbr>counts" in html
    assert "<th>ln<wbr>(1/<wbr>(1-k))/<wbr>rate</th>" in html  # a formula header breaks too
    assert _cells(html.replace("<wbr>", ""))[0][0] == "tests/test_paper_items.py::test_counts"  # same text
    assert "a short one" in html and len("test_counts") <= LONG_TOKEN  # short tokens untouched
    assert "1.883" in str(house_table(pd.DataFrame({"v": ["1.883 (0.057)"]})).data)  # decimals never split


def test_a_table_of_many_columns_is_set_in_a_smaller_type_and_a_narrow_one_is_not():
    from hacn_core.engine.tables import COLUMN_PX, LAYOUTS, _layout, _min_chars

    narrow = pd.DataFrame({"rule": ["H-ACN"], "test accuracy (%)": [91.23]})
    assert '<table class="house">' in str(house_table(narrow).data)
    # numbers never wrap: n columns of 7-character numbers ("123,456") need 7 n characters in any layout;
    # at 0.6 em a character and the padding of each column that is 77.8 n px in the house type, 62.7 n px
    # compact and 51.5 n px dense, against 97% of the 784 px column
    tables = {n: pd.DataFrame({f"p{i}": [123_456] for i in range(n)}) for n in (9, 12, 14, 20)}
    classes = {n: re.search(r'<table class="([^"]+)">', str(house_table(t).data)).group(1) for n, t in tables.items()}
    assert classes == {9: "house", 12: "house compact", 14: "house dense", 20: "house dense"}
    heads, cells = [f"p{i}" for i in range(12)], [["123,456"]] * 12
    assert _min_chars(heads, cells, [True] * 12) == 12 * 7
    width = {name: 16 * size * (0.6 * 84 + 2 * pad * 12) for name, size, pad in LAYOUTS}
    assert width["house"] > 0.97 * COLUMN_PX >= width["house compact"]
    assert _layout(heads, cells, [True] * 12) == "house compact"


def test_devices_summary_counts_runs_per_device_and_reads_a_resumed_run_in_order():
    from types import SimpleNamespace

    from hacn_core.engine.tables import devices_summary

    runs = [SimpleNamespace(provenance={"device": "cpu"}) for _ in range(3)] + [SimpleNamespace(provenance={})]
    assert devices_summary(runs) == "cpu (3 runs); device not recorded (1 run)"
    assert devices_summary(runs[:3]) == "cpu"
    resumed = SimpleNamespace(provenance={"device": "cuda: H100; cpu: EPYC"})  # begun on one, ended on another
    assert devices_summary([resumed, resumed]) == "cuda: H100, then cpu: EPYC"
