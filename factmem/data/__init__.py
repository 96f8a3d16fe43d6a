"""Datasets: conversation logs with ground truth — the file format, loading and saving, the
synthetic generator (scenarios and presets) and the importer of real time-stamped facts."""
