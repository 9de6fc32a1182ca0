"""Plot of asoodeh2021 Fig 2."""

import matplotlib.pyplot as plt

from dpfl.plotting import PALETTE


def fig2(df, spec, meta):
    plot = spec["plot"]
    fig, ax = plt.subplots(figsize=plot["figsize"], layout="constrained")
    for i, (curve, d) in enumerate(df.groupby("curve", sort=False)):
        ax.plot(d["x"], d["y"], color=PALETTE[i], label=curve)
    ax.set_yscale(plot["yscale"])
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε)")
    p = spec["params"]
    # the parameters only: the figure's title already names Theorem 2
    ax.set_title(f"η={p['step_size']:g}, L={p['lipschitz']:g}, ρ={p['radius']:g}, σ={p['sigma']:g}, "
                 f"n={p['n_users']}", fontsize=8)
    ax.legend()
    return fig
