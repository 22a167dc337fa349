"""Pre-trained encoders from disk: find the folder, read its params and
tokenizer, run a text through its family's forward pass in numpy.

Python API::

    from attncli.models import load_model, trace, sentence_embeddings
    model = load_model("path/to/all-MiniLM-L6-v2")   # or a name in the HF cache
    t = trace(model, "The pink elephant tried to get into the car but it was too big")
    t.tokens, t.weights                              # [n], [n_layer, n_head, n, n]
    sentence_embeddings(model, ["a sweet yellow fruit", "banana"])   # [2, d_model]

A model is a Hugging Face folder: ``config.json``, ``model.safetensors`` and
``vocab.txt`` or ``tokenizer.json`` (sentence-transformers' ``1_Pooling`` and
``modules.json`` say how to pool). Or the name of one already in the local
Hugging Face cache; nothing is ever downloaded. Reading needs the optional
``models`` extra (safetensors, tokenizers): no torch, no transformers.

The modules, one job each:

    loading.py   find the folder, read config.json, params, tokenizer, pooling -> Model
    families.py  FAMILIES: config.json's model_type -> Family (bert first)
    base.py      Family (config, params by name, forward), ModelConfig, Tensors
    bert.py      the BERT family: BertConfig, BertParams, forward
    blocks.py    what families share: Linear, Norm, dense, layer_norm, activations
    pooling.py   sentence-transformers' pooling modes
    running.py   tokenize, trace, sentence_embeddings
"""

from attncli.models.base import Family
from attncli.models.families import FAMILIES
from attncli.models.loading import Model, load_model
from attncli.models.running import Batch, Trace, sentence_embeddings, tokenize, trace

__all__ = ["FAMILIES", "Batch", "Family", "Model", "Trace", "load_model", "sentence_embeddings", "tokenize", "trace"]
