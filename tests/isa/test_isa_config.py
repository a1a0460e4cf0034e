"""Config: TVM's vta_config.json format, validation messages, derived quantities, presets, and
``vta config show``/``write``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vta.cli.main import main
from vta.isa import Config, ConfigError, MemType, VTAError, preset_names

pytestmark = pytest.mark.unit

# TVM's 3rdparty/vta-hw/config/vta_config.json, as TVM writes it (spaces before the colons).
TVM_CONFIG = """{
  "TARGET" : "sim",
  "HW_VER" : "0.0.2",
  "LOG_INP_WIDTH" : 3,
  "LOG_WGT_WIDTH" : 3,
  "LOG_ACC_WIDTH" : 5,
  "LOG_BATCH" : 0,
  "LOG_BLOCK" : 4,
  "LOG_UOP_BUFF_SIZE" : 15,
  "LOG_INP_BUFF_SIZE" : 15,
  "LOG_WGT_BUFF_SIZE" : 18,
  "LOG_ACC_BUFF_SIZE" : 17
}
"""
DEFAULT_PARAMS = dict(LOG_INP_WIDTH=3, LOG_WGT_WIDTH=3, LOG_ACC_WIDTH=5, LOG_BATCH=0,
                      LOG_BLOCK=4, LOG_UOP_BUFF_SIZE=15, LOG_INP_BUFF_SIZE=15,
                      LOG_WGT_BUFF_SIZE=18, LOG_ACC_BUFF_SIZE=17)


def write(tmp_path: Path, text: str, name: str = "vta_config.json") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------------- file format
def test_reads_tvm_file_and_keeps_extra_keys(tmp_path: Path) -> None:
    cfg = Config.from_json(write(tmp_path, TVM_CONFIG))
    assert cfg == Config() and cfg.params == DEFAULT_PARAMS
    assert cfg.to_dict() == {"TARGET": "sim", "HW_VER": "0.0.2", **DEFAULT_PARAMS}
    assert list(cfg.to_dict())[:2] == ["TARGET", "HW_VER"]  # TVM's key order


def test_json_round_trip(tmp_path: Path) -> None:
    cfg = Config.from_json(write(tmp_path, TVM_CONFIG))
    out = tmp_path / "again.json"
    text = cfg.to_json(out)
    assert json.loads(text) == json.loads(TVM_CONFIG)
    again = Config.from_json(out)
    assert again == cfg and again.to_dict() == cfg.to_dict()
    small = Config.preset("small")
    assert Config.from_json(write(tmp_path, small.to_json(), "s.json")).params == small.params


def test_bus_width_is_a_parameter_read_from_the_bus_width_key(tmp_path: Path) -> None:
    """BUS_WIDTH: 64 when a file has none (TVM's files), the file's key otherwise; written only
    when it is not 64, so a default configuration's file stays TVM's; part of equality."""
    tvm = Config.from_json(write(tmp_path, TVM_CONFIG))
    assert tvm.bus_width == tvm.BUS_WIDTH == 64 and tvm.bus_bytes == 8
    wide = Config.from_json(write(tmp_path, json.dumps({**json.loads(TVM_CONFIG),
                                                         "BUS_WIDTH": 128}), "w.json"))
    assert wide.bus_width == 128 and wide.bus_bytes == 16 and wide.params == tvm.params
    assert wide != tvm and wide == tvm.with_bus_width(128) and hash(wide) != hash(tvm)
    assert wide.to_dict()["BUS_WIDTH"] == 128 and "BUS_WIDTH" not in tvm.to_dict()
    assert dict(wide.extra) == {"TARGET": "sim", "HW_VER": "0.0.2"}  # not an extra key
    assert Config.from_json(write(tmp_path, wide.to_json(), "again.json")) == wide
    assert wide.hw_params == {**DEFAULT_PARAMS, "BUS_WIDTH": 128}
    for bad in (96, "128", True, None):
        with pytest.raises(ConfigError, match=f"BUS_WIDTH={bad!r} is not a bus width; use 64 "
                                              "or 128"):
            Config.from_dict({**DEFAULT_PARAMS, "BUS_WIDTH": bad}, source="c.json")


def test_config_write_sets_the_bus_width(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    assert main(["config", "write", "--preset", "small", "--bus-width", "128", "-o",
                 str(out)]) == 0
    assert Config.from_json(out) == Config.preset("small").with_bus_width(128)


def test_to_json_writes_atomically(tmp_path: Path) -> None:
    with pytest.raises(VTAError, match="directory .*missing does not exist"):
        Config().to_json(tmp_path / "missing" / "c.json")
    assert list(tmp_path.iterdir()) == []


def test_other_extra_keys_are_kept(tmp_path: Path) -> None:
    data = {**DEFAULT_PARAMS, "LOG_BLOCK": 5, "TARGET": "pynq", "NOTE": [1, 2]}
    cfg = Config.from_json(write(tmp_path, json.dumps(data)))
    assert cfg.block == 32
    assert json.loads(cfg.to_json()) == data


def test_malformed_json_has_line_and_column(tmp_path: Path) -> None:
    # line 4, column 3: the missing comma after line 3
    text = '{\n  "TARGET": "sim",\n  "LOG_INP_WIDTH": 3\n  "LOG_WGT_WIDTH": 3\n}\n'
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        Config.from_json(p)
    assert f"{p}:4:3:" in str(e.value) and "not valid JSON" in str(e.value)


@pytest.mark.parametrize("text,needle", [
    ("[3, 3, 5]", "expected a JSON object, got list"),
    ('{"LOG_INP_WIDTH": 3}', "missing key(s) LOG_WGT_WIDTH, LOG_ACC_WIDTH"),
])
def test_wrong_json_shape(tmp_path: Path, text: str, needle: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        Config.from_json(p)
    assert str(p) in str(e.value) and needle in str(e.value)


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Config.from_json(tmp_path / "nope.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="cannot read config file"):
        Config.from_json(tmp_path / "bin.json")


# ------------------------------------------------------------------- validation
@pytest.mark.parametrize("changes,needles", [
    # non-integers (as JSON can give them)
    ({"LOG_BATCH": "0"}, ["LOG_BATCH", "'0'", "integer"]),
    ({"LOG_BLOCK": 4.0}, ["LOG_BLOCK", "4.0", "integer"]),
    ({"LOG_BLOCK": True}, ["LOG_BLOCK", "True", "integer"]),
    ({"LOG_INP_BUFF_SIZE": None}, ["LOG_INP_BUFF_SIZE", "None", "integer"]),
    # negative and absurd logs
    ({"LOG_BATCH": -1}, ["LOG_BATCH=-1", "[0, 4]"]),
    ({"LOG_BLOCK": 40}, ["LOG_BLOCK=40", "[1, 6]"]),
    ({"LOG_INP_WIDTH": 6}, ["LOG_INP_WIDTH=6", "[3, 4]", "8- or 16-bit"]),
    ({"LOG_UOP_BUFF_SIZE": 64}, ["LOG_UOP_BUFF_SIZE=64", "out of range"]),
    # accumulators narrower than the inputs (the range of LOG_ACC_WIDTH rules it out)
    ({"LOG_INP_WIDTH": 4, "LOG_ACC_WIDTH": 3}, ["LOG_ACC_WIDTH=3", "[4, 5]", "accumulators"]),
    # a buffer smaller than one element: wgt elements are 16*16 B = 2^8 B at the default
    ({"LOG_WGT_BUFF_SIZE": 7}, ["LOG_WGT_BUFF_SIZE=7", "smaller than one wgt element",
                                "256 bytes", "at least 8"]),
    ({"LOG_ACC_BUFF_SIZE": 5}, ["LOG_ACC_BUFF_SIZE=5", "acc element", "64 bytes", "at least 6"]),
    # a buffer deeper than the 16-bit sram_base can address: 2^20 B of uops = 2^18 entries
    ({"LOG_UOP_BUFF_SIZE": 20}, ["LOG_UOP_BUFF_SIZE=20", "2^18 entries", "16-bit sram_base",
                                 "at most 18"]),
])
def test_rejections_name_key_value_rule(changes: dict, needles: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        Config(**{**DEFAULT_PARAMS, **changes})
    msg = str(e.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, (n, msg)


def test_acc_buffer_too_big_breaks_the_micro_op() -> None:
    # LOG_ACC_BUFF_SIZE=18: acc depth 2^(18-0-4-5+3) = 2^12, so dst_idx and src_idx are 12 bits
    # and wgt_idx 10 (2^(18-8-3+3)): 34 bits > 32. The GEMM and ALU words overflow too.
    with pytest.raises(ConfigError) as e:
        Config(**{**DEFAULT_PARAMS, "LOG_ACC_BUFF_SIZE": 18})
    msg = str(e.value)
    assert "micro-op layout needs 34 bits but has 32" in msg
    assert "dst_idx:12, src_idx:12, wgt_idx:10" in msg
    assert "GEMM instruction" in msg and "ALU instruction" in msg
    assert "LOG_ACC_BUFF_SIZE=18" in msg


def test_uop_buffer_too_big_breaks_gemm_only() -> None:
    # LOG_UOP_BUFF_SIZE=17: uop_bgn 15 bits, uop_end 16. GEMM: 7+1+15+16+14 = 53; iter_in would
    # straddle bit 64 so spans 64..77; the four 11-bit factors end at 122; wgt_factor_out (10)
    # would straddle bit 128 so moves to 128..137 and wgt_factor_in ends at 148 > 128. The
    # micro-op (11, 11, 10 bits) still fits.
    with pytest.raises(ConfigError) as e:
        Config(**{**DEFAULT_PARAMS, "LOG_UOP_BUFF_SIZE": 17})
    msg = str(e.value)
    assert "GEMM instruction layout needs 148 bits but has 128" in msg
    assert "micro-op" not in msg.split("; the index widths")[0]
    assert "LOG_UOP_BUFF_SIZE=17" in msg
    # 16 breaks it as well (8+14+15+14 = 51: iter_in straddles bit 64 again); 15, the
    # default, leaves iter_in at 49..62.
    with pytest.raises(ConfigError, match="GEMM instruction layout needs 148 bits"):
        Config(**{**DEFAULT_PARAMS, "LOG_UOP_BUFF_SIZE": 16})


def test_from_dict_prefixes_the_source(tmp_path: Path) -> None:
    p = write(tmp_path, json.dumps({**DEFAULT_PARAMS, "LOG_BATCH": -2}))
    with pytest.raises(ConfigError) as e:
        Config.from_json(p)
    assert str(e.value).startswith(f"{p}: LOG_BATCH=-2")


def test_unknown_preset() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'huge'; choose one of .*small"):
        Config.preset("huge")


# ------------------------------------------------------------------- derived quantities
def test_default_derived_quantities_match_architecture_md() -> None:
    cfg = Config()
    assert (cfg.batch, cfg.block_in, cfg.block_out) == (1, 16, 16)
    assert (cfg.inp_width, cfg.wgt_width, cfg.acc_width, cfg.out_width) == (8, 8, 32, 8)
    assert (cfg.uop_depth, cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth) == (8192, 2048, 1024, 2048)
    assert (cfg.uop_elem_bytes, cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.acc_elem_bytes,
            cfg.out_elem_bytes) == (4, 16, 256, 64, 16)
    assert [cfg.elem_bytes(m) for m in MemType] == [4, 256, 16, 64, 16]  # UOP WGT INP ACC OUT
    assert [cfg.depth(m) for m in MemType] == [8192, 1024, 2048, 2048, 2048]
    assert cfg.macs_per_cycle == 256


def test_small_preset_derived_by_hand() -> None:
    cfg = Config.preset("small")
    p = cfg.params
    assert p == dict(LOG_INP_WIDTH=3, LOG_WGT_WIDTH=3, LOG_ACC_WIDTH=5, LOG_BATCH=0, LOG_BLOCK=2,
                     LOG_UOP_BUFF_SIZE=10, LOG_INP_BUFF_SIZE=10, LOG_WGT_BUFF_SIZE=10,
                     LOG_ACC_BUFF_SIZE=11)
    # formulas of ARCHITECTURE.md evaluated by hand
    assert (cfg.batch, cfg.block_in, cfg.block_out) == (1, 4, 4)
    assert cfg.log_uop_depth == 10 - 2 == 8
    assert cfg.log_inp_depth == 10 - 0 - 2 - 3 + 3 == 8
    assert cfg.log_wgt_depth == 10 - 2 * 2 - 3 + 3 == 6
    assert cfg.log_acc_depth == 11 - 0 - 2 - 5 + 3 == 7
    assert (cfg.uop_depth, cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth) == (256, 256, 64, 128)
    # bytes: inp 1*4*8/8, wgt 4*4*8/8, acc 1*4*32/8, out 1*4*8/8
    assert (cfg.uop_elem_bytes, cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.acc_elem_bytes,
            cfg.out_elem_bytes) == (4, 4, 16, 16, 4)
    assert cfg.out_depth == cfg.acc_depth == 128


def test_presets() -> None:
    names = preset_names()
    assert {"default", "small"} <= set(names)
    assert Config.preset("default") == Config()
    for n in names:
        assert isinstance(Config.preset(n), Config)


def test_config_is_frozen_and_replace_validates() -> None:
    cfg = Config()
    with pytest.raises(AttributeError):
        cfg.LOG_BLOCK = 3  # type: ignore[misc]
    assert cfg.replace(LOG_BLOCK=5).block == 32
    with pytest.raises(ConfigError, match="LOG_BATCH=9"):
        cfg.replace(LOG_BATCH=9)


# ------------------------------------------------------------------- vta config show / write
def test_config_show_text(capsys) -> None:
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "LOG_ACC_BUFF_SIZE  17" in out
    assert "GEMM core          1x16x16 (256 MACs/cycle), int8 x int8 -> int32" in out
    assert "acc buffer           2048 entries x   64 B = 131072 B" in out
    assert main(["config", "show", "--preset", "small"]) == 0
    assert "1x4x4 (16 MACs/cycle)" in capsys.readouterr().out


def test_config_show_layout_and_json(capsys) -> None:
    assert main(["config", "show", "--layout"]) == 0
    out = capsys.readouterr().out
    assert "[ 57: 26] dram_base" in out and "[127:112] imm signed" in out
    assert main(["config", "show", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["params"] == {**DEFAULT_PARAMS, "BUS_WIDTH": 64}
    d = info["derived"]
    assert (d["uop_depth"], d["inp_depth"], d["wgt_depth"], d["acc_depth"]) == (
        8192, 2048, 1024, 2048)
    uop = {f["name"]: (f["msb"], f["lsb"]) for f in info["layout"]["micro-op"]}
    assert uop == {"dst_idx": (10, 0), "src_idx": (21, 11), "wgt_idx": (31, 22)}


def test_config_show_from_file(tmp_path: Path, capsys) -> None:
    p = write(tmp_path, json.dumps({**DEFAULT_PARAMS, "LOG_BATCH": 1, "LOG_INP_BUFF_SIZE": 16,
                                    "LOG_ACC_BUFF_SIZE": 18}))
    assert main(["config", "show", "--config", str(p), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["derived"]
    assert (d["batch"], d["inp_elem_bytes"], d["acc_elem_bytes"]) == (2, 32, 128)


@pytest.mark.parametrize("args_of,needle", [
    (lambda p: ["config", "show", "--preset", "huge"], "unknown preset 'huge'"),
    (lambda p: ["config", "show", "--config", str(p / "missing.json")], "does not exist"),
    (lambda p: ["config", "show", "--config", str(write(p, "{\n,"))], ":2:1: not valid JSON"),
    (lambda p: ["config", "show", "--config",
                str(write(p, json.dumps({**DEFAULT_PARAMS, "LOG_BLOCK": 0})))],
     "LOG_BLOCK=0 is out of range"),
])
def test_config_show_errors(tmp_path: Path, capsys, args_of, needle: str) -> None:
    assert main(args_of(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta config: error: ") and needle in err
    assert err.count("\n") == 1


def test_config_write(tmp_path: Path) -> None:
    out = tmp_path / "small.json"
    assert main(["config", "write", "--preset", "small", "-o", str(out)]) == 0
    assert Config.from_json(out) == Config.preset("small")
