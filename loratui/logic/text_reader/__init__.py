"""One reader of training text: printed Trainer dicts, JSON lines, `step N loss X` lines, tqdm bars.

`TextReader` is incremental (feed lines, get events) so a watched command's output is read live and a
100 MB log with bounded memory; `values.printed_dict` is the one parser of a printed Trainer log dict.
"""

from loratui.logic.text_reader.reader import TextReader
from loratui.logic.text_reader.values import TRAIN_KEYS, is_eval, is_train, printed_dict

__all__ = ["TRAIN_KEYS", "TextReader", "is_eval", "is_train", "printed_dict"]
