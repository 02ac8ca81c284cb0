"""The registered models: they learn their synthetic tasks, split into layers, count FLOPs."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from accelbench.grid import TrainExperiment
from accelbench.train import settings as train_settings
from accelbench.train import synthetic
from accelbench.train.flops import flops_per_sample
from accelbench.train.loop import measure_training
from accelbench.train.models import OptionError, call, models, resolve_options
from accelbench.train.models.gcn import normalized_adjacency

# model -> (option overrides on top of the tiny options, steps, batch). The large
# torchvision networks get two classes and a smaller step so a few steps show learning.
LEARNING = {
    "resnet50": ({"lr": 0.002, "classes": 2}, 8, 4),
    "alexnet": ({"lr": 0.02, "classes": 2}, 8, 4),
    "resnet18": ({}, 12, 8),
}
DEFAULT_LEARNING = ({}, 24, 8)
POOL = 4  # synthetic batches cycled by the loop (accelbench.train.session.BATCH_POOL)


@pytest.mark.parametrize("name", list(models()))
def test_loss_falls_on_the_synthetic_task(name):
    spec = models()[name]
    overrides, steps, batch = LEARNING.get(name, DEFAULT_LEARNING)
    settings = {
        "seed": 0,
        "steps": steps,
        "warmup_steps": 0,
        "model_options": {**spec.tiny_options, **overrides},
        "config_hash": "t",
    }
    outcome = measure_training(TrainExperiment(name, "cpu1", "fp32", "single", batch), settings)
    assert outcome.status == "ok", outcome.reason
    losses = outcome.series["loss"]["values"]
    assert len(losses) == steps
    # Each pass over the pool sees the same batches, so compare whole passes.
    first, last = sum(losses[:POOL]) / POOL, sum(losses[-POOL:]) / POOL
    assert last < first, f"{name}: loss did not fall: {losses}"


@pytest.mark.parametrize("name", [name for name, spec in models().items() if spec.layers])
def test_layers_compose_to_the_forward_pass(name):
    spec = models()[name]
    options = resolve_options(spec, spec.tiny_options)
    torch.manual_seed(0)
    model = spec.build(options).eval()
    inputs, _ = spec.make_batch(torch.Generator().manual_seed(0), 2, options)
    layers = spec.layers(model)
    assert len(layers) >= 3
    members = {id(module) for module in model.modules()}
    for layer in layers:
        for parameter in layer.parameters():
            shared = any(parameter is p for p in model.parameters())
            assert shared, "layers hold the model's own weights"
    assert any(id(layer) in members for layer in layers)
    with torch.no_grad():
        out = inputs
        for layer in layers:
            out = layer(out)
        torch.testing.assert_close(out, call(model, inputs))


def test_models_without_layers_are_the_gan_and_the_gcn():
    assert sorted(name for name, spec in models().items() if spec.layers is None) == [
        "dcgan",
        "gcn",
    ]


@pytest.mark.parametrize("name", sorted(models()))
def test_the_catalogue_agrees_with_the_model_module(name):
    """The grid plans from the catalogue alone; each module must provide what it promises."""
    spec = models()[name]
    assert spec.splittable == (spec.layers is not None)
    assert spec.implementation.__name__ == spec.module_name
    assert spec.module_name == f"accelbench.train.models.{spec.module or name}"
    for attribute in ("build", "make_batch", "loss"):
        assert callable(getattr(spec, attribute))
    assert (spec.dataset is not None) == (spec.real_data is not None)


def test_planning_the_default_grid_does_not_import_torch():
    """Parsing the Snakefile (config, grid, exclusions) runs for every Slurm job: no torch."""
    code = (
        "import sys\n"
        "from accelbench import config, grid\n"
        "from accelbench.train import datasets, settings\n"
        "assert grid.expand(config.load()).experiments\n"
        "print(sorted(name for name in ('torch', 'torchvision') if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_an_unknown_attribute_of_a_spec_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'bulid'"):
        _ = models()["fcn"].bulid


def test_resnet56_is_he_et_al_cifar_network():
    spec = models()["resnet56"]
    model = spec.build(resolve_options(spec))
    # He et al. (2016), table 6: ResNet-56 has 0.85 M parameters.
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(0.85e6, rel=0.01)
    convolutions = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(convolutions) + len(linears) == 56
    logits = model(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, 10)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("resnet56", {"depth": 52}, "depth must be 6n + 2"),
        ("alexnet", {"image_size": 32}, "alexnet needs image_size >= 63; got 32"),
        ("dcgan", {"image_size": 24}, "image_size must be a power of two >= 16; got 24"),
        ("autoencoder", {"image_size": 30}, "image_size must be a multiple of 4; got 30"),
        ("resnet18", {"depth": 20}, "depth must be one of 18, 34, 50, 101, 152; got 20"),
    ],
)
def test_sizes_a_model_cannot_take_are_refused(name, options, message):
    spec = models()[name]
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("+", r"\+")):
        spec.build(resolve_options(spec, options))


def test_options_resolve_defaults_image_size_and_overrides():
    spec = models()["resnet50"]
    assert resolve_options(spec) == {"lr": 0.001, "depth": 50, "image_size": 64, "classes": 10}
    assert resolve_options(spec, image_size=224)["image_size"] == 224
    assert resolve_options(spec, {"image_size": 96}, image_size=224)["image_size"] == 96
    # A CIFAR-size model keeps its own image size whatever train.image_size says.
    assert resolve_options(models()["resnet56"], image_size=224)["image_size"] == 32
    assert resolve_options(models()["fcn"], {"hidden": [8, 8, 8, 8]})["hidden"] == [8, 8, 8, 8]
    assert resolve_options(models()["fcn"], {"lr": 1})["lr"] == 1


@pytest.mark.parametrize(
    ("model", "overrides", "message"),
    [
        ("resnet56", {"dept": 20}, "model_options.resnet56.dept: unknown option; allowed: lr"),
        ("lstm", {"hidden": "big"}, "lstm.hidden: 'big' is a str, expected a int like the default"),
        ("fcn", {"hidden": [8, 2.5]}, "fcn.hidden: [8, 2.5] is a list, expected a list"),
        ("alexnet", {"classes": True}, "alexnet.classes: True is a bool, expected a int"),
    ],
)
def test_bad_model_options_name_the_key(model, overrides, message):
    with pytest.raises(OptionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        resolve_options(models()[model], overrides)


def test_config_model_options_are_checked_by_name():
    config = {"train": {"model_options": {"resnet56": {"depth": 20}}, "image_size": 64}}
    train_settings.validate(config)
    config["train"]["model_options"] = {"vgg16": {}}
    with pytest.raises(ValueError, match="unknown model 'vgg16'; allowed: alexnet"):
        train_settings.validate(config)


def test_settings_for_one_model_carry_only_its_options():
    config = {
        "seed": 3,
        "train": {
            "steps": 5,
            "warmup_steps": 1,
            "image_size": 96,
            "model_options": {"lstm": {"hidden": 64}, "fcn": {"classes": 3}},
            "data_dir": "",
            "compile": "off",
        },
    }
    lstm = train_settings.for_model(config, "lstm")
    assert lstm["model_options"] == {"hidden": 64}
    assert lstm["seed"] == 3 and lstm["image_size"] == 96 and lstm["data_dir"] is None
    assert train_settings.for_model(config, "resnet18")["model_options"] == {}
    parsed = train_settings.TrainSettings.from_mapping({**lstm, "config_hash": "x"})
    assert parsed.steps == 5 and parsed.pipeline_microbatches == 4
    with pytest.raises(ValueError, match="unknown training settings \\['stepz'\\]"):
        train_settings.TrainSettings.from_mapping({"stepz": 3})
    with pytest.raises(ValueError, match="compile 'fast' is not known; allowed: off, eager"):
        train_settings.TrainSettings.from_mapping({"compile": "fast"})


def test_fcn_flops_match_the_layer_sizes():
    spec = models()["fcn"]
    options = resolve_options(spec, {"input_dim": 32, "hidden": [16, 16], "classes": 4})
    state = torch.random.get_rng_state()
    counted = flops_per_sample(spec, options, seed=0)
    shapes = [(32, 16), (16, 16), (16, 4)]
    forward = sum(2 * a * b for a, b in shapes)
    weight_gradients = forward
    input_gradients = sum(2 * a * b for a, b in shapes[1:])  # the input needs no gradient
    assert counted == forward + weight_gradients + input_gradients
    assert torch.equal(state, torch.random.get_rng_state()), "counting must not draw numbers"


def test_lstm_flops_are_counted():
    spec = models()["lstm"]
    options = resolve_options(spec, spec.tiny_options)
    counted = flops_per_sample(spec, options, seed=0)
    hidden, embed, length = options["hidden"], options["embed"], options["seq_len"]
    # Forward of the two gate matrices of the first layer alone: 2 * 4H * (E + H) per step.
    assert counted > 2 * 4 * hidden * (embed + hidden) * length


def test_attention_flops_are_counted():
    spec = models()["gpt"]
    options = resolve_options(spec, spec.tiny_options)
    wider = resolve_options(spec, {**spec.tiny_options, "seq_len": 2 * options["seq_len"]})
    # Doubling the sequence doubles the per-token work and quadruples attention's.
    assert flops_per_sample(spec, wider, 0) > 2 * flops_per_sample(spec, options, 0)


def test_gcn_flops_fall_back_to_the_cpu_for_sparse_products():
    spec = models()["gcn"]
    options = resolve_options(spec, spec.tiny_options)
    nodes, width, hidden = options["nodes"], options["features"], options["hidden"]
    # Dense work only: the first convolution's forward alone is 2 * nodes * width * hidden.
    assert flops_per_sample(spec, options, 0) > 2 * nodes * width * hidden


def test_gcn_adjacency_is_the_normalised_dense_one():
    generator = torch.Generator().manual_seed(1)
    nodes = 5
    edges = synthetic.random_edges(generator, 2, nodes, 2)
    sparse = normalized_adjacency(edges, nodes, torch.float64).to_dense()
    dense = torch.zeros(2 * nodes, 2 * nodes, dtype=torch.float64)
    for graph in range(2):
        for source, target in edges[graph].T.tolist():
            dense[graph * nodes + source, graph * nodes + target] += 1
            dense[graph * nodes + target, graph * nodes + source] += 1
    dense += torch.eye(2 * nodes, dtype=torch.float64)
    scale = dense.sum(dim=1).rsqrt()
    torch.testing.assert_close(sparse, scale[:, None] * dense * scale[None, :])
    assert sparse[:nodes, nodes:].abs().sum() == 0, "graphs of a batch are not connected"


def test_token_chain_is_learnable_and_never_uses_the_mask_token():
    generator = torch.Generator().manual_seed(0)
    tokens = synthetic.token_chain(generator, 64, 50, 20)
    assert tokens.min() >= 1 and tokens.max() < 20
    again = synthetic.token_chain(torch.Generator().manual_seed(0), 64, 50, 20)
    assert torch.equal(tokens, again)
    # The most frequent successor of each token follows it in most of the steps.
    pairs = torch.stack([tokens[:, :-1].reshape(-1), tokens[:, 1:].reshape(-1)])
    follows = 0
    for token in range(1, 20):
        successors = pairs[1][pairs[0] == token]
        follows += torch.bincount(successors).max().item()
    assert follows / pairs.shape[1] > 0.7
    inputs, targets = synthetic.masked_token_task(generator, tokens)
    hidden = inputs == synthetic.MASK_TOKEN
    assert hidden.any(dim=1).all()
    assert torch.equal(targets[hidden], tokens[hidden])
    assert (targets[~hidden] == synthetic.IGNORE_INDEX).all()


def test_synthetic_task_is_the_same_for_every_batch_of_a_seed():
    generator = torch.Generator().manual_seed(5)
    first = synthetic.class_templates(generator, 3, (4,))
    torch.randn(10, generator=generator)  # drawing batches moves the generator on
    assert torch.equal(first, synthetic.class_templates(generator, 3, (4,)))
    other = synthetic.class_templates(torch.Generator().manual_seed(6), 3, (4,))
    assert not torch.equal(first, other)
