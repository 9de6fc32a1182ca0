"""The federated round engine shared by every training paper: the one round loop with its evaluation schedule,
failure rules, timing and rows (`engine`), padded silo data for lowy2023's GLMs (`data`), the device choice and
the allocator setting of a job's process (`device`), the registry of methods (`methods`), batched local training of
many model copies (`local`: local SGD, mean gradients, clipped sums, DP-SGD, outputs) on the pairs' padded buckets
and the rows each step reads (`buckets`), a model as a function of one flat parameter vector (`flat_model`) with the
gradient path it picks once: closed forms, hand-written MLP passes or `torch.func` (`gradients`), and user-level
clipping and weighting (`aggregate`)."""
