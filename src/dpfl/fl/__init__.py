"""The federated round engine shared by every training paper: padded silo data (`data`), the round loop with
iterate averaging and divergence tracking in torch (`engine`), the device choice (`device`), the registry of
methods (`methods`) and generic per-example gradients through `torch.func` (`grads`)."""
