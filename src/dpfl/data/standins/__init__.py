"""Synthetic stand-ins: one module per dataset, each with `VERSION` and `generate(out_dir, seed, ...)`, which writes
raw files in the real dataset's own format (same names, header, line endings, counts), so the real loader and
everything downstream run unchanged. Deterministic: the seed comes from the dataset name (common.standin_seed) and
gzip output carries no time stamp, so every run writes the same bytes. Size keywords exist for the tests only."""
