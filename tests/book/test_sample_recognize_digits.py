"""samples/recognize_digits.py runs end to end (one short epoch on generated digits)."""
import os
import runpy
import sys

SAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "recognize_digits.py")


def test_sample_trains_reports_and_saves(tmp_path, monkeypatch, capsys):
    save_dir = tmp_path / "model"
    monkeypatch.setattr(sys, "argv", [SAMPLE, "--epochs", "1", "--data", "generated",
                                      "--train-size", "256", "--save-dir", str(save_dir)])
    runpy.run_path(SAMPLE, run_name="__main__")
    out = capsys.readouterr().out
    assert "generated seven-segment digits: 256 train / 200 test images" in out
    assert "epoch 1/1" in out and "test accuracy" in out
    assert (save_dir / "__model__").exists() and (save_dir / "conv2d_0.w_0").exists()
    assert "predicted:" in out and "actual:" in out
