"""The federated round engine shared by every training paper: the one round loop with its evaluation schedule,
failure rules, timing and rows (`engine`), padded silo data for lowy2023's GLMs (`data`), the device choice
(`device`), the registry of methods (`methods`), batched local training of many model copies with per-example
gradients through `torch.func` or closed forms (`local`), and user-level clipping and weighting (`aggregate`)."""
