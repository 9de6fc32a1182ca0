"""The limits across keys and on the data's size (dpfl.config_limits): each impossible setting is refused when the
configuration is loaded, with the file that set it, the key path, the value and the limit; every shipped
configuration passes at every scale; a snakemake run with one such setting stops before any job.

To stay fast, the refusals load a copy of the configuration whose paper files keep only the figures a test needs (the
other papers' files keep no figure), at the paper scale unless a test writes its own scale part (dpfl.config.load
reads every paper file; the limits are per figure)."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from dpfl import config, config_limits
from dpfl.papers import FIGURES, PAPERS

from tests.test_pipeline import copy_project, snakemake

ROOT = Path(__file__).resolve().parent.parent
LOADER, DUMPER = getattr(yaml, "CSafeLoader", yaml.SafeLoader), getattr(yaml, "CSafeDumper", yaml.SafeDumper)
FIG12 = "      default_users: 20\n"  # a line of kato2024 Fig 12's params
LOWY, BIETTI, KATO = "config/papers/lowy2023.yaml", "config/papers/bietti2022.yaml", "config/papers/kato2024.yaml"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A copy of the configuration for the module; its schemas link to the project's (read only), so that the schema
    validators the loader caches per schema file are built once for every test here."""
    dest = tmp_path_factory.mktemp("limits")
    shutil.copytree(ROOT / "config", dest / "config")
    (dest / "workflow").mkdir()
    (dest / "workflow/schemas").symlink_to(ROOT / "workflow/schemas", target_is_directory=True)
    return dest


def write_config(root: Path, paper: str, figures: list[str], edits=(), scale: dict | None = None) -> dict:
    """The shipped paper file of `paper` with `edits` ((old, new) text replacements), keeping only `figures` (and no
    claims over several figures); the other papers' files without figures; config/scales/quick.yaml = {papers: scale}.
    Returns the overrides that load it (the quick scale when a scale part is given, else the paper scale)."""
    for p in PAPERS:
        data = {"paper": p, "figures": {}}
        if p == paper:
            text = (ROOT / f"config/papers/{p}.yaml").read_text()
            for old, new in edits:
                assert old in text, old
                text = text.replace(old, new, 1)
            data = yaml.load(text, Loader=LOADER)
            data["figures"] = {f: v for f, v in data["figures"].items() if f in figures}
            data.pop("claims", None)  # claims over several figures name figures left out here
        (root / f"config/papers/{p}.yaml").write_text(yaml.dump(data, Dumper=DUMPER, sort_keys=False,
                                                                allow_unicode=True))
    (root / "config/scales/quick.yaml").write_text(yaml.safe_dump({"papers": scale or {}}, allow_unicode=True))
    return {"scale": "quick" if scale else "paper"}


def refused(root: Path, paper: str, figures: list[str], edits=(), scale: dict | None = None,
            overrides: dict | None = None) -> str:
    """The message of the ConfigError that loading the edited configuration raises."""
    wanted = write_config(root, paper, figures, edits, scale)
    with pytest.raises(config.ConfigError) as err:
        config.load(root, {**wanted, **(overrides or {})})
    return str(err.value)


def assert_names(msg: str, file: str, line: str, *more: str) -> None:
    """The message groups its lines under the file that set the value; `line` begins one of them."""
    assert f"invalid configuration in {file}:\n" in msg, msg
    block = msg.split(f"invalid configuration in {file}:\n", 1)[1]
    assert f"  - {line}" in block, msg
    for needle in more:
        assert needle in msg, f"{needle!r} not in:\n{msg}"


# --------------------------------------------------------------------------------------------------
# no false positive (first: the full loads build the schema validators the other tests reuse)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", ["smoke", "quick", "paper"])
def test_every_shipped_configuration_passes_at_every_scale(scale):
    cfg = config.load(ROOT, {"scale": scale, "ablations": True, "compat_variants": True})
    assert config_limits.check(cfg, config.read_yaml(ROOT / f"config/scales/{scale}.yaml")) is None


# --------------------------------------------------------------------------------------------------
# lowy2023
# --------------------------------------------------------------------------------------------------


def test_lowy_more_silos_per_round_than_silos(root):
    msg = refused(root, "lowy2023", ["fig4"], [("silos: 25, silos_per_round: 25}", "silos: 25, silos_per_round: 30}")])
    assert_names(msg, LOWY, "figures.fig4.params.panels[0].silos_per_round: 30 must be <= 25, the panel's n_silos "
                            "(figures.fig4.params.panels[0].n_silos)", "dpfl.papers.lowy2023.isrl")


def test_lowy_mnist_more_silos_than_digit_pairs(root):
    msg = refused(root, "lowy2023", ["fig7"], [("n_silos: 25, silos_per_round: 12", "n_silos: 30, silos_per_round: 9")])
    assert_names(msg, LOWY, "figures.fig7.params.panels[0].n_silos: 30 must be <= 25, the (even, odd) digit-pair "
                            "silos of allocation mnist-pairs")


def test_lowy_obesity_more_silos_than_classes(root):
    msg = refused(root, "lowy2023", ["fig6"], [("n_silos: 7, silos_per_round: 3}", "n_silos: 9, silos_per_round: 3}")])
    assert_names(msg, LOWY, "figures.fig6.params.panels[0].n_silos: 9 must be <= 7, the classes of obesity "
                            "(the documented size of the real data; not prepared yet)")


def test_lowy_insurance_silo_without_two_training_rows(root):
    msg = refused(root, "lowy2023", ["fig5"], [("n_silos: 10, silos_per_round: 5", "n_silos: 500, silos_per_round: 5")])
    assert_names(msg, LOWY, "figures.fig5.params.panels[0].n_silos: 500 leaves an insurance silo with 0 training rows: "
                            "the 1338 rows", "⌈1338/N⌉ = 3 rows", "every N <= 42 does")


def test_lowy_batch_larger_than_a_silo_names_the_scale_file_that_cut_the_rounds(root):
    scale = {"lowy2023": {"all_figures": {"params": {"rounds": 1}}}}
    msg = refused(root, "lowy2023", ["fig4"], scale=scale)
    assert_names(msg, "config/scales/quick.yaml",
                 "papers.lowy2023.all_figures.params.rounds (as figures.fig4): 1 with the largest ε 18 "
                 "(figures.fig4.params.epsilons) gives a batch K = ⌊1238·sqrt(ε/(4R))⌋ = 2626 in panel a, more than "
                 "the 1238 training rows of an MNIST silo", "allowed: rounds >= 5 at that ε")


def test_lowy_obesity_batch_needs_eps_at_most_four_rounds(root):
    msg = refused(root, "lowy2023", ["fig6"], [("epsilons: [0.5, 1, 3, 6, 9]", "epsilons: [0.5, 1, 3, 6, 500]")])
    assert_names(msg, LOWY, "figures.fig6.params.epsilons: the largest ε 500 with rounds R = 100 "
                            "(figures.fig6.params.rounds) gives a batch K = ⌊n_min·sqrt(ε/(4R))⌋",
                 "allowed: a largest ε <= 400 at R = 100")


@pytest.mark.parametrize("old, new, line", [
    ("per_digit: 774}", "per_digit: 6000}", "allocations.mnist-pairs.params.per_digit: 6000 must be <= 5421, the "
                                            "training images of the rarest digit"),
    ("pca_components: 50,", "pca_components: 800,", "allocations.mnist-pairs.params.pca_components: 800 must be <= "
                                                    "784, the pixels of an MNIST image"),
])
def test_lowy_mnist_pairs_allocation_beyond_the_images(root, old, new, line):
    msg = refused(root, "lowy2023", [], [(old, new)])
    assert_names(msg, LOWY, line)


# --------------------------------------------------------------------------------------------------
# bietti2022
# --------------------------------------------------------------------------------------------------


def test_bietti_more_users_per_round_than_users(root):
    old = "          users_per_round: 10\n          batch: 10\n          epochs: 20"
    msg = refused(root, "bietti2022", ["fig1c"], [(old, old.replace("round: 10", "round: 2000"))])
    assert_names(msg, BIETTI, "figures.fig1c.params.grids.emnist_linear.users_per_round: 2000 must be <= 1000, the "
                              "grid's users (figures.fig1c.params.grids.emnist_linear.users)")


def test_bietti_more_users_than_the_prepared_data_holds(root):
    msg = refused(root, "bietti2022", ["fig1b"], [("users: 500", "users: 501")])
    assert_names(msg, BIETTI, "figures.fig1b.params.grids.stackoverflow.users: 501 must be <= 500, the users of the "
                              "prepared stackoverflow data (the documented size of the real data; not prepared yet)")


def test_the_limit_is_the_prepared_data_the_run_reads(root):
    """A prepared stand-in holds 40 users: the run reads it (data_source auto); data_source real replaces it, so the
    documented size of the real data is the limit."""
    from dpfl.data.common import save_prepared

    prepared = root / "data/prepared/stackoverflow.npz"
    save_prepared(prepared, {"train_offsets": np.zeros(41, np.int64)},
                  {"dataset": "stackoverflow", "standin": True, "counts": {"users": 40, "train": 0, "test": 0}})
    try:
        msg = refused(root, "bietti2022", ["fig1b"], [("users: 500", "users: 60")])
        assert_names(msg, BIETTI, "figures.fig1b.params.grids.stackoverflow.users: 60 must be <= 40, the users of the "
                                  "prepared stackoverflow data (data/prepared/stackoverflow.npz, a stand-in)")
        write_config(root, "bietti2022", ["fig1b"], [("users: 500", "users: 60")])
        config.load(root, {"scale": "paper", "data_source": "real"})  # 60 ≤ the real data's 500
    finally:
        shutil.rmtree(root / "data")


def test_bietti_cnn_on_a_task_without_images(root):
    msg = refused(root, "bietti2022", ["fig1d"], [("          task: emnist\n          model: cnn",
                                                   "          task: stackoverflow\n          model: cnn")])
    assert_names(msg, BIETTI, "figures.fig1d.params.grids.emnist_cnn.model: 'cnn' needs an image task (emnist), not "
                              "task 'stackoverflow'")


def test_bietti_more_personal_coordinates_than_dim_in_an_ablation_names_the_ablation(root):
    msg = refused(root, "bietti2022", ["fig1a"], [("d20: {params: {grids: {synthetic: {synthetic: {dim: 20}}}}",
                                                   "d20: {params: {grids: {synthetic: {synthetic: {dim: 4}}}}")])
    assert_names(msg, BIETTI, "figures.fig1a.params.grids.synthetic.synthetic.personal: 5 must be <= 4, the task's "
                              "dim (figures.fig1a.params.grids.synthetic.synthetic.dim, set at config/papers/"
                              "bietti2022.yaml figures.fig1a.ablations.d20.params.grids.synthetic.synthetic.dim)",
                 "(in the ablation-d20 variant)")


def test_bietti_fig1_draws_one_grid(root):
    second = "        other: {task: synthetic, rounds: 3, clip: 1.0, sigmas: [0], levels: [0], etas: [1.0]}\n"
    msg = refused(root, "bietti2022", ["fig1a"], [("      grids:\n        synthetic:\n",
                                                   "      grids:\n" + second + "        synthetic:\n")])
    assert_names(msg, BIETTI, "figures.fig1a.params.grids: 2 grids (other, synthetic); Fig 1 draws exactly one")
    assert "ablations" not in msg  # the same in every variant: one line, at the paper file's key


def test_bietti_fig1_show_picks_no_run(root):
    msg = refused(root, "bietti2022", ["fig1c"], [("show: {sigmas: [0, 3, 10], levels: [0, 0.1, 1, 10, inf]}",
                                                   "show: {sigmas: [7], levels: [0.2]}")])
    assert_names(msg, BIETTI, "figures.fig1c.params.show.sigmas: [7] picks none of the grid's sigmas "
                              "[0, 0.1, 0.3, 1, 2, 3, 5, 10, 20, 30, 50, 100]",
                 "figures.fig1c.params.show.levels: [0.2] picks none of the grid's levels")


def test_bietti_two_sigmas_naming_one_cell(root):
    msg = refused(root, "bietti2022", ["fig1a"], [("sigmas: [0, 3, 10]", "sigmas: [0, 3, 3.0]")])
    assert_names(msg, BIETTI, "figures.fig1a.params.grids.synthetic.sigmas[2]: '3' names the same σ cell as "
                              "figures.fig1a.params.grids.synthetic.sigmas[1]")


# --------------------------------------------------------------------------------------------------
# kato2024
# --------------------------------------------------------------------------------------------------


def test_kato_more_users_than_heart_disease_records(root):
    msg = refused(root, "kato2024", ["fig6"], [("- {id: a, users: 50, distribution: uniform, silos: 4}",
                                                "- {id: a, users: 100000, distribution: uniform, silos: 4}")])
    assert_names(msg, KATO, "figures.fig6.params.panels[0].users: 100000 must be <= 486: every user of a "
                            "heart_disease allocation holds ≥ 1 of the 486 training records (centres of "
                            "[199, 172, 30, 85]); the documented size of the real data; not prepared yet")


def test_kato_more_tcga_users_than_record_pairs(root):
    msg = refused(root, "kato2024", ["fig7"], [("- {id: b, users: 50, distribution: zipf, silos: 6}",
                                                "- {id: b, users: 500, distribution: zipf, silos: 6}")])
    assert_names(msg, KATO, "figures.fig7.params.panels[1].users: 500 must be <= 432: every user of a tcga_brca "
                            "allocation holds ≥ 2 records in some centre")


def test_kato_flamby_silos_other_than_the_centres(root):
    msg = refused(root, "kato2024", ["fig6"], [("- {id: b, users: 50, distribution: zipf, silos: 4}",
                                                "- {id: b, users: 50, distribution: zipf, silos: 5}")])
    assert_names(msg, KATO, "figures.fig6.params.panels[1].silos: 5 must be 4, the FLamby centres of heart_disease")


def test_kato_creditcard_more_silos_or_uniform_users_than_training_records(root):
    msg = refused(root, "kato2024", ["fig13"], [("- {id: b, users: 100, distribution: uniform, silos: 5}",
                                                 "- {id: b, users: 30000, distribution: uniform, silos: 30000}")])
    assert_names(msg, KATO, "figures.fig13.params.panels[1].silos: 30000 must be <= 24584, the training records of a "
                            "creditcard seed",
                 "figures.fig13.params.panels[1].users: 30000 must be <= 24584")


def test_kato_distribution_the_dataset_does_not_have(root):
    msg = refused(root, "kato2024", ["fig6"], [("- {id: b, users: 50, distribution: zipf, silos: 4}",
                                                "- {id: b, users: 50, distribution: zipf-iid, silos: 4}")])
    assert_names(msg, KATO, "figures.fig6.params.panels[1].distribution: 'zipf-iid' is not a distribution of "
                            "heart_disease; allowed: uniform, zipf")


def test_kato_allocation_scheme_of_another_dataset(root):
    msg = refused(root, "kato2024", ["fig9"], [("      dataset: tcga_brca\n      allocation: tcga_brca\n      panels:\n"
                                                "        - {id: a, users: 200",
                                                "      dataset: tcga_brca\n      allocation: heart_disease\n"
                                                "      panels:\n        - {id: a, users: 200")])
    assert_names(msg, KATO, "figures.fig9.params.allocation: 'heart_disease' allocates heart_disease "
                            "(allocations.heart_disease.dataset), not tcga_brca (figures.fig9.params.dataset)")


def test_kato_hyper_block_with_a_missing_or_unused_key(root):
    fig9_hyper = "      hyper:\n        avg: {eta_g: 10.0, clip: 0.1, eta_l: 0.001, epochs: 50}\n    authors_code:"
    msg = refused(root, "kato2024", ["fig9"], [(fig9_hyper, fig9_hyper.replace("clip: 0.1, ", ""))])
    assert_names(msg, KATO, "figures.fig9.params.hyper.avg: lacks clip, which uldp_avg, uldp_avg_w need(s): the avg "
                            "block takes exactly eta_g, eta_l, epochs, clip")
    sgd = "sgd: {eta_g: 10.0, clip: 0.1}"
    msg = refused(root, "kato2024", ["fig4"], [(sgd, sgd.replace("}", ", epochs: 2}"))])
    assert_names(msg, KATO, "figures.fig4.params.hyper.sgd.epochs: 2 is not used by uldp_sgd")


def test_kato_sampled_method_without_sampling_rates(root):
    msg = refused(root, "kato2024", ["fig10a"], [("sampling_rates: [0.1, 0.3, 0.5, 0.7]", "sampling_rates: []")])
    assert_names(msg, KATO, "figures.fig10a.params.sampling_rates: [] gives uldp_avg_ws no curve")


def test_kato_two_panels_with_one_id(root):
    msg = refused(root, "kato2024", ["fig13"], [("- {id: b, users: 100, distribution: uniform, silos: 5}",
                                                 "- {id: a, users: 100, distribution: uniform, silos: 5}")])
    assert_names(msg, KATO, "figures.fig13.params.panels[1].id: 'a' names the same panel as "
                            "figures.fig13.params.panels[0].id")


def test_kato_secure_protocol_on_a_small_key_outside_a_simulation(root):
    msg = refused(root, "kato2024", ["fig12"], [(FIG12, FIG12 + "      key_bits: 2048\n")])
    assert_names(msg, KATO, "figures.fig12.params.key_bits: 2048 must be >= 3072 for the secure level of securities "
                            "['paper', 'secure'] (figures.fig12.params.securities), unless simulation is true "
                            "(figures.fig12.params.simulation (not written: the default of "
                            "workflow/schemas/papers/kato2024.schema.yaml))")


def test_kato_record_bound_the_key_cannot_hold(root):
    msg = refused(root, "kato2024", ["fig12"], [(FIG12, FIG12 + "      record_bound: 3000\n")])
    assert_names(msg, KATO, "figures.fig12.params.record_bound: 3000 must be <= 2098 for a 3072-bit key "
                            "(figures.fig12.params.key_bits (not written: the default of "
                            "workflow/schemas/papers/kato2024.schema.yaml))")


# --------------------------------------------------------------------------------------------------
# asoodeh2021, balle2020
# --------------------------------------------------------------------------------------------------


def test_asoodeh_q_times_n_not_an_integer(root):
    msg = refused(root, "asoodeh2021", ["fig2"], [("q: [0.1, 0.2, 0.3]", "q: [0.1, 0.2, 0.305]")])
    assert_names(msg, "config/papers/asoodeh2021.yaml",
                 "figures.fig2.params.q[2]: 0.305 gives a batch m = q·n_users = 30.5 users per iteration with n_users "
                 "= 100 (figures.fig2.params.n_users); allowed: q·n_users an integer")


def test_balle_plotted_p0_not_computed(root):
    msg = refused(root, "balle2020", ["thm3_2"], [("    plot:\n      p0: 1.0", "    plot:\n      p0: 0.7")])
    assert_names(msg, "config/papers/balle2020.yaml",
                 "figures.thm3_2.plot.p0: 0.7 must be one of figures.thm3_2.params.p0 = [0.1, 0.5, 1.0]")


# --------------------------------------------------------------------------------------------------
# the registry and the sizes
# --------------------------------------------------------------------------------------------------


def test_every_figure_family_is_registered_once():
    families = {(paper, fdef.family.name) for (paper, _), fdef in FIGURES.items()}
    assert families == set(config_limits.FIGURE_LIMITS) | config_limits.NO_LIMITS
    assert not set(config_limits.FIGURE_LIMITS) & config_limits.NO_LIMITS


def test_the_documented_sizes_are_the_codes():
    from dpfl.config_limits.kato2024 import _creditcard_training_records
    from dpfl.config_limits.sizes import DOCUMENTED
    from dpfl.data.checks import CREDITCARD_FRAUDS, CREDITCARD_ROWS
    from dpfl.data.loaders import emnist, stackoverflow
    from dpfl.data.standins import insurance, mnist, obesity
    from dpfl.papers.kato2024.split import creditcard_split

    sizes = DOCUMENTED
    assert sizes["mnist"]["train_labels"] == list(mnist.TRAIN_COUNTS)
    assert (sizes["mnist"]["train"], sizes["mnist"]["test"]) == (sum(mnist.TRAIN_COUNTS), sum(mnist.TEST_COUNTS))
    assert sizes["mnist"]["pixels"] == mnist.SIDE ** 2
    assert sizes["insurance"]["rows"] == inspect.signature(insurance.generate).parameters["n_rows"].default
    assert sizes["obesity"]["rows"] == inspect.signature(obesity.generate).parameters["n_rows"].default
    assert (sizes["creditcard"]["rows"], sizes["creditcard"]["frauds"]) == (CREDITCARD_ROWS, CREDITCARD_FRAUDS)
    assert sizes["emnist"]["users"] == emnist.MAX_USERS and sizes["stackoverflow"]["users"] == stackoverflow.USERS
    y = np.zeros(CREDITCARD_ROWS, np.int64)
    y[:CREDITCARD_FRAUDS] = 1
    train = creditcard_split(np.zeros((len(y), 1)), y, np.random.default_rng(0))["train"]
    assert _creditcard_training_records(CREDITCARD_ROWS, CREDITCARD_FRAUDS) == len(train) == 24584


# --------------------------------------------------------------------------------------------------
# end to end: a snakemake run stops before any job
# --------------------------------------------------------------------------------------------------


def test_snakemake_stops_before_any_job_on_a_limit(tmp_path):
    project = copy_project(tmp_path / "project")
    write_config(project, "asoodeh2021", ["fig2"], [("q: [0.1, 0.2, 0.3]", "q: [0.1, 0.2, 0.305]")])
    proc = snakemake(project, "--cores", "1", "--config", "scale=paper")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "dpfl configuration error: invalid configuration in config/papers/asoodeh2021.yaml:" in out
    assert "figures.fig2.params.q[2]: 0.305 gives a batch m = q·n_users = 30.5" in out
    assert not (project / "results").exists() and not (project / "data").exists(), "a job ran"
