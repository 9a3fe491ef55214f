# make_tokenizer.py DIR: a tiny local Hugging Face tokenizer (word level,
# whitespace split) for the Python benchmark clients, which insist on
# loading one. The fakeserver's token text " tok" is one token of it.
import json
import os
import sys

from tokenizers import Tokenizer, models, pre_tokenizers, decoders

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
vocab = {"[UNK]": 0, "tok": 1}
for i in range(2, 1000):
    vocab["w%d" % i] = i
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
tok.save(os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
               "model_max_length": 1000000}, f)
