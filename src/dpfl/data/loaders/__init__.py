"""Loaders: one module per dataset, each with `VERSION` and `load(raw_dir) -> (arrays, info)`, reading the raw files
(real or stand-in: same format) into the arrays of data/prepared/<dataset>.npz; `info` (counts, encodings) goes
into its meta. Errors name the dataset, the file and the problem."""
