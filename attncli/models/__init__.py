"""Pre-trained models from disk: find the folder (or GGUF file), read its
params and tokenizer, run a text through its family's forward pass in numpy.

Python API::

    from attncli.models import load_model, trace, sentence_embeddings
    model = load_model("path/to/all-MiniLM-L6-v2")   # or a name in the HF cache
    t = trace(model, "The pink elephant tried to get into the car but it was too big")
    t.tokens, t.weights                              # [n], [n_layer, n_head, n, n]
    sentence_embeddings(model, ["a sweet yellow fruit", "banana"])   # [2, d_model]

    from attncli.models import Selection, decode, generate
    model = load_model("SmolLM2-135M-Instruct.Q4_1.gguf")             # a decoder
    d = decode(model, "The pink elephant tried to get into the car but it was too",
               Selection(layers=(3,), summaries=True))
    d.weights, d.next[0].tokens, d.summaries.first   # [1, 9, n, n], [' big', …], [30, 9]
    generate(model, "The pink elephant", 20).generated
    h = explain_head(model, d.ids, layer=9, head=3, query=10)         # one token through one head
    h.x[10], h.q_used, h.steps.weights[0], h.attended, h.projected    # every step, the model's numbers

A model is a Hugging Face folder: ``config.json``, ``model.safetensors`` (or
its shards and ``model.safetensors.index.json``) and ``vocab.txt`` or
``tokenizer.json`` (sentence-transformers' ``1_Pooling`` and ``modules.json``
say how to pool); a llama.cpp ``.gguf`` file; or the name of a folder
already in the local Hugging Face cache. Nothing is ever downloaded. Reading
needs the optional ``models`` extra (safetensors, tokenizers, ml_dtypes,
gguf): no torch, no transformers.

The modules, one job each:

    loading.py      find the folder or file, read config.json, params, tokenizer, pooling -> Model
    checkpoints.py  model.safetensors or its shards, through readers.tensors
    jsonfiles.py    the folder's JSON files, read with one-line errors
    ggufs.py        a GGUF: metadata as fields, tensors dequantised and renamed, the tokenizer rebuilt
    fields.py       Fields: config.json's names, read with checks, each remembering its name in the file
    conventions.py  CONVENTIONS: each family's attention (scale, window, RoPE, soft-cap, ALiBi) per layer
    convention.py   Convention: one family's rules put together -> LayerAttention
    rules.py        the rules: sizes, scales, layer types, windows, ALiBi, what comes from a file
    roperules.py    RoPE's rules: pairing, θ per layer type, the rotated features, RoPE scaling
    families.py     FAMILIES: config.json's model_type -> Family
    base.py         Family (config, params by name, forward; DecoderSteps, GgufNames), Tensors
    bert.py         the BERT family (an encoder)
    gpt2.py         the GPT-2 family (a decoder)
    llama.py        the Llama family: Llama, Mistral, Qwen2 (decoders)
    gemma.py        the Gemma family: Gemma, Gemma 2, Gemma 3 (decoders)
    lens.py         the logit lens: each layer's output through the final norm and output head
    decoder.py      a decoder's layers driven with a KV cache; Selection, Kept, HeadSummaries
    decoding.py     decode, generate -> Decoded (tokens, weights, next-token predictions); predictions
    explaining.py   explain_head -> HeadSteps: one query through one head of one layer, every step
    aggregates.py   maps combined: over heads (mean, max), through layers (rollout)
    blocks.py       what families share: Linear, Norm, dense, layer_norm, rms_norm, activations
    pooling.py      sentence-transformers' pooling modes
    running.py      tokenize, trace, sentence_embeddings (encoders, and decoders as they)
"""

from attncli.models.base import Family
from attncli.models.conventions import CONVENTIONS, LayerAttention, layer_attention
from attncli.models.decoder import HeadSummaries, Selection
from attncli.models.decoding import Decoded, Prediction, decode, generate
from attncli.models.explaining import HeadSteps, explain_head
from attncli.models.families import FAMILIES
from attncli.models.fields import Fields
from attncli.models.loading import Model, load_model
from attncli.models.running import Batch, Trace, sentence_embeddings, tokenize, trace

__all__ = [
    "CONVENTIONS",
    "FAMILIES",
    "Batch",
    "Decoded",
    "Family",
    "Fields",
    "HeadSteps",
    "HeadSummaries",
    "LayerAttention",
    "Model",
    "Prediction",
    "Selection",
    "Trace",
    "decode",
    "explain_head",
    "generate",
    "layer_attention",
    "load_model",
    "sentence_embeddings",
    "tokenize",
    "trace",
]
