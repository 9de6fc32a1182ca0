"""dpfl-repro: regenerate the experiment figures of five papers on differentially private federated learning."""

__version__ = "0.1.0"
