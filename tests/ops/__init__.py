"""Op tests (package so that basenames may repeat those in tests/, e.g. test_clip.py)."""
