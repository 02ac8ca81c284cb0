"""The registered models: they learn their synthetic tasks, split into layers, count FLOPs."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch

from accelbench.families.base import GridError
from accelbench.families.train import TrainExperiment
from accelbench.families.train import parse as parse_train
from accelbench.measuring.settings import SettingsError
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
    "alexnet-s": ({"lr": 0.02, "classes": 2}, 8, 4),
    "resnet18": ({}, 12, 8),
}
DEFAULT_LEARNING = ({}, 24, 8)
POOL = 4  # synthetic batches cycled by the loop (accelbench.train.session.BATCH_POOL)


@pytest.mark.parametrize("name", list(models()))
def test_loss_falls_on_the_synthetic_task(name):
    spec = models()[name]
    overrides, steps, batch = LEARNING.get(name, DEFAULT_LEARNING)
    settings = train_settings.TrainSettings(
        seed=0, steps=steps, warmup_steps=0, model_options={**spec.tiny_options, **overrides}
    )
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


@pytest.mark.parametrize("name", list(models()))
def test_only_a_model_with_layers_is_planned_as_a_pipeline(name):
    wildcards = {
        "model": name,
        "device": "cuda2",
        "precision": "fp32",
        "strategy": "pipeline",
        "batch": "8",
    }
    if models()[name].layers is None:
        with pytest.raises(GridError, match="declares no layer sequence"):
            parse_train(wildcards)
    else:
        assert parse_train(wildcards).strategy == "pipeline"


@pytest.mark.parametrize("name", sorted(models()))
def test_the_catalogue_agrees_with_the_model_module(name):
    """The grid plans from the catalogue alone; each module must provide what it promises."""
    spec = models()[name]
    assert spec.splittable == (spec.layers is not None)
    assert spec.implementation.__name__ == spec.module_name
    assert spec.module_name == f"accelbench.train.models.{spec.module or name}"
    for attribute in ("build", "make_batch", "loss"):
        assert callable(getattr(spec, attribute))
    assert spec.dataset is None or spec.real_data is not None
    if spec.real_data is not None:  # entries that share a module may go without its dataset
        sharing = [other for other in models().values() if other.module_name == spec.module_name]
        assert any(other.dataset is not None for other in sharing)


def test_planning_the_default_grid_imports_neither_torch_nor_numba():
    """Parsing the Snakefile (config, grid, exclusions) runs for every Snakemake process and
    every Slurm job: no torch, and no Numba (about a second), which only a compile needs."""
    heavy = ("torch", "torchvision", "numba", "numba.cuda")
    code = (
        "import sys\n"
        "from accelbench import config, grid\n"
        "from accelbench.roofs import stream\n"
        "from accelbench.train import datasets, settings\n"
        "assert grid.expand(config.load()).experiments\n"
        f"print(sorted(name for name in {heavy} if name in sys.modules))\n"
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


def _parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def test_alexnet_r_is_shi_et_al_cifar_network():
    """dlbench tools/torch/Models/alexnet.lua: cuda-convnet's layers-18pct without LRN."""
    spec = models()["alexnet-r"]
    assert spec.dataset == "cifar10" and not spec.follows_image_size
    options = resolve_options(spec, image_size=224)  # keeps CIFAR's 32 x 32
    model = spec.build(options)
    nn = torch.nn
    expected = [
        nn.Conv2d(3, 32, 5, padding=2),
        nn.MaxPool2d(3, 2),
        nn.ReLU(),
        nn.Conv2d(32, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.AvgPool2d(3, 2),
        nn.Flatten(1),
        nn.Linear(64 * 3 * 3, 10),
    ]
    assert [repr(layer) for layer in model] == [repr(layer) for layer in expected]
    images = torch.randn(2, 3, 32, 32)
    assert model[:-1](images).shape == (2, 576)  # 32 -> 15 -> 7 -> 3 pixels, 64 channels
    assert model(images).shape == (2, 10)
    # Convolutions 5 x 5 with biases, then the linear layer: 85,098.
    by_hand = (3 * 32 * 25 + 32) + (32 * 32 * 25 + 32) + (32 * 64 * 25 + 64) + (576 * 10 + 10)
    assert _parameters(model) == by_hand == 85_098
    # Other sizes get a linear layer to fit, down to 15 pixels (1 x 1 after the last pooling).
    smallest = spec.build(resolve_options(spec, {"image_size": spec.min_image_size}))
    assert smallest[-1].in_features == 64 and smallest(torch.randn(2, 3, 15, 15)).shape == (2, 10)
    with pytest.raises(RuntimeError):
        smallest[:-2](torch.randn(1, 3, 14, 14))


def test_alexnet_s_is_shi_et_al_one_gpu_alexnet():
    """dlbench synthetic/experiments/torch/cnn/alexnet/alexnet.lua (the "one weird trick" net)."""
    spec = models()["alexnet-s"]
    assert spec.dataset is None and spec.follows_image_size
    options = resolve_options(spec)
    assert (options["image_size"], options["classes"]) == (224, 1000)
    model = spec.build(options)
    nn = torch.nn
    features = [
        nn.Conv2d(3, 96, 11, stride=4, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(384, 384, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(3, 2),
    ]
    classifier = [
        nn.Flatten(1),
        nn.Linear(256 * 6 * 6, 4096),
        nn.ReLU(),
        nn.Linear(4096, 4096),
        nn.ReLU(),
        nn.Linear(4096, 1000),
    ]
    expected = [*features, nn.AdaptiveAvgPool2d((6, 6)), *classifier]
    assert [repr(layer) for layer in model] == [repr(layer) for layer in expected]
    with torch.no_grad():
        mapped = model[: len(features)](torch.randn(1, 3, 224, 224))
        assert mapped.shape == (1, 256, 6, 6)  # 224 -> 55 -> 27 -> 13 -> 6
        assert torch.equal(model[len(features)](mapped), mapped), "the identity at 224"
    # Weights plus biases: convolutions 3*96*11*11 + 96*256*5*5 + 256*384*3*3 + 384*384*3*3
    # + 384*256*3*3 = 3,745,824 weights and 96 + 256 + 384 + 384 + 256 = 1,376 biases
    # (3,747,200); linear 9216*4096 + 4096*4096 + 4096*1000 = 58,621,952 weights and
    # 4096 + 4096 + 1000 = 9,192 biases (58,631,144). Total 62,378,344.
    assert _parameters(model) == 62_378_344
    # 63 pixels is the smallest image: 63 -> 14 -> 6 -> 2 -> 1 (62 would leave 0).
    with torch.no_grad():
        assert model[: len(features)](torch.randn(1, 3, 63, 63)).shape == (1, 256, 1, 1)
        with pytest.raises(RuntimeError):
            model[: len(features)](torch.randn(1, 3, 62, 62))
    assert spec.min_image_size == 63


@pytest.mark.parametrize(
    ("name", "widths", "dataset", "parameters"),
    [
        # 784*2048+2048 + 2048*4096+4096 + 4096*1024+1024 + 1024*10+10
        ("fcn-r", [784, 2048, 4096, 1024, 10], "mnist", 14_205_962),
        # 26752*2048+2048 + 2*(2048*2048+2048) + 2048*26752+26752
        ("fcn-s", [26752, 2048, 2048, 2048, 26752], None, 117_997_696),
    ],
)
def test_fcn_s_and_fcn_r_are_shi_et_al_networks(name, widths, dataset, parameters):
    """dlbench synthetic/experiments/torch/fc/ffn26752bm.lua and tools/torch/Models/ffn5.lua."""
    spec = models()[name]
    assert spec.dataset == dataset and spec.module == "fcn"
    with torch.device("meta"):  # shapes only: FCN-S would take 0.5 GB of weights
        model = spec.build(resolve_options(spec))
    linears = [layer for layer in model if isinstance(layer, torch.nn.Linear)]
    assert [(layer.in_features, layer.out_features) for layer in linears] == list(
        itertools.pairwise(widths)
    )
    by_hand = sum(a * b + b for a, b in itertools.pairwise(widths))  # weights and biases
    assert _parameters(model) == by_hand == parameters
    kinds = [type(layer).__name__ for layer in model]
    assert kinds == ["Linear", "Sigmoid"] * (len(widths) - 2) + ["Linear"]


def test_fcn_activation_is_relu_unless_asked():
    spec = models()["fcn"]
    model = spec.build(resolve_options(spec, spec.tiny_options))
    assert {type(layer).__name__ for layer in model} == {"Linear", "ReLU"}
    sigmoid = spec.build(resolve_options(spec, {**spec.tiny_options, "activation": "sigmoid"}))
    assert {type(layer).__name__ for layer in sigmoid} == {"Linear", "Sigmoid"}
    with pytest.raises(ValueError, match="fcn option activation: 'tanh' is not one of relu, sig"):
        spec.build(resolve_options(spec, {"activation": "tanh"}))


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("resnet56", {"depth": 52}, "depth must be 6n + 2"),
        ("alexnet", {"image_size": 32}, "alexnet needs image_size >= 63; got 32"),
        ("alexnet-s", {"image_size": 62}, "alexnet-s needs image_size >= 63; got 62"),
        ("alexnet-r", {"image_size": 14}, "alexnet-r needs image_size >= 15; got 14"),
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
    parsed = train_settings.TrainSettings.from_params(lstm)
    assert parsed.steps == 5 and parsed.pipeline_microbatches == 4
    assert train_settings.TrainSettings.from_params(parsed.as_params()) == parsed
    # The job's context is not a setting: the params of a rule never hold it.
    with pytest.raises(SettingsError, match="unknown TrainSettings key 'config_hash'; allowed: "):
        train_settings.TrainSettings.from_params({**lstm, "config_hash": "x"})
    with pytest.raises(SettingsError, match="key 'stepz'; allowed: seed, runs, half_width, "):
        train_settings.TrainSettings.from_params({"stepz": 3})
    with pytest.raises(ValueError, match="compile 'fast' is not known; allowed: off, eager"):
        train_settings.TrainSettings.from_params({"compile": "fast"})


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
