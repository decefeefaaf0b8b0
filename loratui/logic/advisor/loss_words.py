"""What a person says the loss does, read the way a maintainer reads a report: a SUBJECT (the loss, the model,
the accuracy, the weights or gradients, the learning rate) and what is said of it after it in the same clause (a
PREDICATE: it stays put, it falls, it rises, it is zero), with the negation between them turning a fall into a
loss that does not move (`the loss does not decrease`) and a rise or a standstill into nothing (`the loss no
longer explodes`, `not stuck anymore`); the last predicate said of a subject is where it went (`decreases at
first, then goes up`). A supposition (`what if`, `how to avoid`, `in case`) reports nothing; a validation loss
that rises is overfitting (reported as such, not as the training loss's divergence); an RL or preference objective
is judged by its own metrics.

Pure: a line in, a `Said` or None. None when the line says nothing this reader can tell: the older, narrower
readers in `said.py` get their turn then."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from loratui.logic.advisor import objectives

# -- subjects ---------------------------------------------------------------------------------------------------

_LOSS = (r"(?:(?<![A-Za-z])(?:(?:train(?:ing)?|total|lm|my|the|model|overall|average|avg|mean|running)[ _/])?"
         r"(?:loss(?:es)?(?:[ _](?:values?|curves?|function))?|ppl|perplexity|困惑度)(?![A-Za-z(])"
         r"(?!\s*(?:of|[_ ]?scal\w*|[_ ]?fn|[_ ]?weights?|[_ ]?mask|[_ ]?type|[_ ]?name|[_ ]?key)\b)|损失(?:值|函数)?)")
_VAL = r"(?:(?:val(?:id(?:ation)?)?|eval(?:uation)?|test|dev)(?:[ _/-]?(?:set|data))?[ _/-]?|(?:验证|测试)(?:集)?(?:上的?)?\s*)"
_ACC = r"(?:(?<![A-Za-z])(?:accuracy|acc)(?![A-Za-z])|准确率|正确率)"
_MODEL = r"(?:(?<![A-Za-z_])(?:model|network|net|nn|lora|adapters?|classifier)(?![A-Za-z_])|模型)"
_PROCESS = (r"(?:(?<![A-Za-z_])(?:training|fine-?tuning|run)(?![A-Za-z_])"
            r"(?!\s+(?:curves?|stages?|sets?|data\w*|loop|scripts?|code|process|time|speed|steps?|args|arguments|"
            r"config\w*|samples?|examples?|jobs?)\b)|训练(?!集|数据|脚本|代码|时间|速度))")
"""The run as a subject (`training diverges`), not a part of it (`the training curve`, `training data`)."""
_OTHER = (r"(?:\b(?:the\s+)?(?:number|count|amount) of \w+|(?:GPU|CPU|显卡|显存)\s*(?:的)?(?:利用率|使用率|占用)|"
          r"\b(?:GPU|CPU|gpu|cpu|device)[ _-]?(?:util\w*|usage|load|memory)\b|"
          # a device as a Chinese clause's subject (`发现CPU一直是100%，GPU只有20%`): what follows is said of it
          r"(?<![A-Za-z])(?:[CG]PU|NPU|显卡)(?=\s*(?:的)?\s*(?:一直|始终|都|只有|也|总是|利用率|使用率|占用|占满))|"
          r"(?<!all )\b(?:the|my|its|batch|sequence)\s+(?:memory|time|speed|size|length|reward|kl|throughput|"
          r"temperature|results?)\b|"
          r"(?<![A-Za-z_])(?:m?AP(?:50|@?\.5)?|f1|bleu|rouge\w*|wer|cer|m?iou|auc|precision|recall|rewards?)"
          r"(?![A-Za-z_])|"
          r"(?<![A-Za-z0-9_.])(?![A-Za-z_]*(?:loss|lr|learning_rate|grad|acc))[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![A-Za-z0-9_(.]))")
"""Another quantity as a subject: what is said after it is not said of the loss (`the loss change becomes small
as the number of epochs increases`); a program's other variable named in a sentence (`negative_approx_kl就会为0`,
`log_prob`): a snake_case name that is not a loss, a learning rate, a gradient or an accuracy."""
_STILL_THINGS = (r"(?:(?<![A-Za-z_])(?:weights?|param(?:eter)?s?|gradients?|grads?|grad[ _]norm)(?![A-Za-z_])|"
                 r"梯度|权重|参数)")
_LR = r"(?:(?<![A-Za-z_])(?:learning[ _]rate|lr)(?![A-Za-z_])|学习率)"
_PREDICTION = r"(?:(?<![A-Za-z_])(?:predictions?|outputs?)(?![A-Za-z_]))"
_EXPLETIVE = (r"\s+(?:seems?|seemed|looks?|looked|appears?|appeared|is|was)\s+"
              r"(?:that|like|as if|as though|\w+\s+(?:that|to|if|whether))\b")
"""`it seems that`, `it is weird that`: an `it` that stands for no subject."""
_SUBJECT = re.compile(
    rf"(?P<val>{_VAL}(?={_LOSS}|{_ACC}))?(?:(?P<loss>{_LOSS})|(?P<acc>{_ACC})|(?P<model>{_MODEL})|"
    rf"(?P<proc>{_PROCESS})|(?P<other>{_OTHER})|(?P<still>{_STILL_THINGS})|(?P<lr>{_LR})|(?P<pred>{_PREDICTION})|"
    rf"(?P<it>(?<![A-Za-z])it(?![A-Za-z'])(?!{_EXPLETIVE})))",
    re.I)
"""`it` stands for the subject named before it in the line (`the loss should go down but it stays at 2.3`)."""

# -- predicates -------------------------------------------------------------------------------------------------

_PAUSED = (r"\s+(?:for\s+(?:about\s+|around\s+|~\s*|over\s+|nearly\s+|almost\s+)?(?:(?:\d+(?:\.\d+)?|a few|several|a couple of|"
           r"some)\s*(?:s|secs?|seconds?|mins?|minutes?|hours?|h)\b|a while)|(?:at|in|during)\s+(?:the\s+)?(?:start|beginning|end)"
           r"\s+of\b)")
"""After `stuck`: a time or an epoch's boundary (`training gets stuck for about 30 seconds at the beginning of every
epoch`): the run pauses, the loss is not said to stand still."""
_STILL = (r"(?:\w*n't|not|never)\s+(?:even\s+|really\s+|seems?\s+to\s+|appear\s+to\s+)?(?:be\s+)?"
          r"train(?:s|ing|ed)?\b|"
          r"降不下(?:去|来)|下不(?:去|来)|上不去|提不上去|升不上去|还是(?:很|那么|一样)?高|还是一样|很平|是平的|"
          r"(?:还是|依然是?|仍然是?|仍是|依旧是?)\s*~?\d|持平|收敛不了|降不了|下降不了|"
          r"一条直线|下降不明显|下降(?:得)?(?:很|非常|特别|极其)?(?:缓慢|慢)|不怎么(?:下)?降|学不到|学不会|不收敛|"
          r"(?:decreas|drop|fall|go(?:es)? down|learn|converg)\w*\s+"
          r"(?:very|extremely|really|so|too|super|incredibly)\s+"
          r"(?:very\s+)?slow(?:ly)?\b(?!\s*(?:at (?:the )?(?:first|start|beginning)|initially|in the beginning|early))|"
          r"stop(?:s|ped|ping)?\s+(?:decreas|dropp|going down|improv|fall|chang|mov|learn|converg)\w*|"
          r"(?:always|only|just)\s+(?:predict|classif)\w*|"
          r"(?:predict|output|generat|produc|giv)\w*\s+(?:exactly\s+)?the same\b(?!\s+(?:size|shape|type|dtype))|"
          r"horizontal|(?:a |straight )?flat line|straight line|flatten(?:s|ed|ing)? out|forever|"
          r"(?:is|are|was|were|stays?|stayed|remains?|remained|looks?)\s+(?:all\s+|always\s+|exactly\s+|almost\s+|"
          r"nearly\s+|basically\s+|still\s+)?(?:the same|identical)\b"
          r"(?!\s+(?:size|way|shape|type|kind|as|number|length|for(?!\s+(?:all|every|each|the whole|the entire)\b)|"
          r"dtype|device|object|to|result|tensor|name|file|"
          r"class|model|config))|"
          r"stuck(?!" + _PAUSED + r")|plateau\w*|stagnat\w*|flatlin\w*|unchang\w*|"
          r"(?:is|are|was|were|be|been|stays?|stayed|remains?|remained|seems?|looks?|keeps?|kept|almost|nearly|"
          r"basically|"
          r"completely|totally|pretty much|quite|still|goes|went|gone|becomes?|became|becoming|turns?|turned|gets?|got|"
          r"getting)\s+(?:\w+\s+){0,3}(?:constant|flat)\b|(?:constant|flat)\s+(?:at|around)\b|"
          r"saturat\w*|level(?:s|ed|ing)? (?:off|out)|fixe[sd]\s+(?:at|around|on)\b|"
          r"(?:stay|stays|stayed|staying|remain|remains|remained|keeps?|kept|sits?|sat|sitting|hover\w*|is always|"
          r"always(?: is| was)?|was always|are always|is still|was still|stuck(?!" + _PAUSED + r")|locks?|locked|"
          r"maintain\w*)"
          r"\s+(?:very\s+|quite\s+|really\s+|pretty\s+|still\s+|extremely\s+)?"
          r"(?:at|around|about|near|on|the same(?!\s+(?!(?:value|level|number|loss|throughout|for|every|no|"
          r"after|across|during|the|at|all|forever|always)\b)[a-z]+)|constant|unchanged|flat|high|~?\d|between|~)\b|"
          r"(?:fluctuat\w*|oscillat\w*|bounc\w*|jump\w* back and forth)\s+(?:around|about|near|between)|"
          r"all the time|"
          r"不变|没变|没怎么(?:变|动|降|下降)|没有变化|没什么变化|没有?变|不动|卡在|停在|一直在|始终在|维持在|稳定在|保持|徘徊|(?:附近|左右|上下|之间|一带)\s*(?:来回)?(?:波动|震荡)|一直是|始终是|"
          r"都是|一直为|始终为|"
          # Japanese: 下がらない / 下がりません (does not fall), 変わらない (does not change), のまま (stays as), 横ばい (flat)
          r"(?:下が|減)(?:らな|らず|りませ)|変わ(?:らな|らず|りませ)|動か(?:な|ず)|のまま|横ばい|"
          # Korean: 줄어들지 않 / 떨어지지 않 / 내려가지 않 (does not fall), 그대로 (as it was), 변하지 않 (does not change)
          r"(?:줄어들|줄|떨어지|내려가|감소하|변하)지\s*(?:않|못)|안\s*(?:줄|떨어|내려)|그대로|변화가\s*없")
_FALL = (r"downward\w*|trend(?:s|ed|ing)? down|decreas\w*|diminish\w*|declin\w*|shrink\w*|descend\w*|lessen\w*|"
         r"drop(?!out)\w*|go(?:es|ing)? down|went down|gone down|come down|fall\w*(?!\s+back)|fell|reduc\w*|lower\w*|"
         r"improv\w*|chang\w*|mov(?:e|es|ed|ing)\b|budge\w*|converg\w*|learn\w*|updat\w*|"
         r"(?:go(?:es|ing)?|went|gone|dip(?:s|ped)?) (?:below|under|lower)|get(?:s|ting)? (?:lower|better|below)|down\b|"
         r"下降|降|收敛|学到|学习|提升|提高|变化|更新")
_RISE = (r"(?:never|not|n't|no|doesn't|didn't|does not|did not)\s+(?:recover\w*|"
         r"(?:came|come|comes|went|go|goes|got|get|gets) back(?: down)?)|spik\w* (?:up )?to \d|spik(?:e|es|ed|ing)\b|increas\w*|"
         r"go(?:es|ing)? up|went up|gone up|goes back up|back up|ris(?:e|es|ing)\b|rose\b|climb\w*|"
         r"grow(?:s|ing|n)?\b|grew\b|jump\w*|explod\w*|explosion|blow(?:s|ing)? up|blew up|blown up|diverg(?:e|es|ed|ing)\b|"
         r"skyrocket\w*|shoot\w* (?:up|to)|shot (?:up|to)|upward\w*|rebound\w*|through the roof|"
         r"(?:gets?|getting|got|becomes?|became|becoming|turns?|turned|go|goes|going|went)\s+"
         r"(?:very\s+|extremely\s+|really\s+|so\s+|"
         r"much\s+|even\s+|a lot\s+)?(?:worse|bigger|larger|higher|high|large|huge|enormous|massive|astronomical|crazy)\b|"
         r"up again|(?:becomes?|became|becoming|is|are|was|were|gets?|got|getting|turns?|turned)\s+"
         r"(?:very\s+|extremely\s+|quite\s+|really\s+|so\s+|more\s+)?unstable\b|不稳定|忽高忽低|"
         r"bigger and bigger|larger and larger|higher and higher|worse and worse|"
         r"上升|变大|变得(?:很|非常|特别|极其|越来越|巨)?(?:大|高)|变(?:成|为)了?(?:一个)?(?:很|非常|特别|极其|巨)?大的|跳到|跳变|突增|猛增|蹿升|增大|增加|升高|变高|爆炸|发散|飙升|暴涨|暴增|回升|反弹|越\w{0,2}越(?:大|高)|"
         r"不降反(?:升|增|涨)|先降后(?:升|增|涨)|上涨|往上涨|涨|"
         # Japanese: 上がる / 上がって (rises), 増える / 増えて (grows), 発散 (diverges), 跳ね上が (jumps up)
         r"上が(?:る|り|っ)|増え|発散|跳ね上が|"
         # Korean: 올라가 / 올라갑니다 / 올라갔 (rises), 증가 (increase), 커지 (grows), 발산 (diverges), 폭발 (explodes)
         r"올라(?:가|갑|갔)|증가|커지|커졌|발산|폭발")
_ZERO = (r"(?:is|are|was|were|becomes?|became|goes to|went to|drops? to|dropped to|falls? to|fell to|turns? (?:in)?to|"
         r"turned (?:in)?to|reach(?:es|ed)?|equals?|always|stays?(?: at)?|remains?(?: at)?|all)\s+"
         r"(?:(?:exactly|always|just|constantly|consistently|still|permanently|both|all)\s+)?(?:equal to\s+)?"
         r"(?:0(?:\.0+)?|zero|zeros|zeroes)(?!\.?\d|[A-Za-z])|(?:is|are|was|were)\s+(?:all\s+|always\s+)?(?-i:None)\b|"
         r"(?:一直|始终|都|就)?(?:变成了?|变为|为|是|等于|降到|降为|到)\s*0(?![.\d])|"
         # what the screen or the log is said to show: a printed 0 (`the train loss shows 0.0 after the first step`)
         r"(?:shows?|showed|shown as|reads?|prints?|printed|displays?|displayed|reports?|reported|logs?|logged)\s+"
         r"(?:as\s+)?(?:(?:exactly|always|just|only|constantly)\s+)?0(?:\.0+)?(?!\.?\d|[A-Za-z%])")
_PREDICATE = re.compile(rf"(?<![A-Za-z])(?:(?P<rise>{_RISE})|(?P<zero>{_ZERO})|(?P<still>{_STILL})|(?P<fall>{_FALL}))",
                        re.I)
"""What is said of a subject, tried in this order at each place: a rise, a zero, a standstill, a fall."""
_NEGATION = re.compile(
    r"\b(?:not|never|no|cannot|hardly|barely|scarcely|without|nothing)\b|n['’]t\b|'nt\b|"
    r"\b(?:does|did|do|ca|wo|is|was|are|were|has|have|had|could|would|dose|dos)nt\b|"
    r"\b(?:does|did|do|is|was|are|were|has|have|could|can|would|will|should)not\b|"
    r"\b(?:fail\w*|refus\w*) to\b|\bno longer\b|不(?![断停时住少同过仅久])|[没未]|无法|难以", re.I)
"""Between a subject and its predicate: `does not`, `won't`, `dosen't`, `fails to`, `refuses to`, `barely`, 不, 没,
无法 (cannot), 难以 (hardly can)."""
_NOTHING = re.compile(r"\b(?:learns?|learned|learnt|learning|trains?)\s+nothing\b|"
                      r"\bnothing (?:is |was |gets? )?(?:learn|train|chang|updat)",
                      re.I)
_SUPPOSED = re.compile(
    r"\b(?:if|whether|unless|in case|lest|to (?:avoid|prevent)|avoid\w*|prevent\w*|make sure|ensure|expect\w*|"
    r"should|how (?:to|do|can|should)|so (?:that )?(?=[^.!?]*\b(?:won't|will not|doesn't|does not|can't|never)\b))\b|"
    r"如果|若|假如|万一|避免|防止|是否|会不会", re.I)
"""Before the subject: the sentence only supposes or wards off what follows (`what if the loss doesn't decrease?`,
`how to avoid the loss exploding`, `so the loss won't blow up`)."""
_SENTENCE = re.compile(r"(?<!\d)[.!?](?!\d)|(?<=\d)\.(?=\s+[A-Z])|[。！？；;\n]|\b(?:but|while|whereas|although|though|however|when|"
                       r"whenever|because|unless|especially|as soon as)\b|但是?|而且?|"
                       r"可是|不过", re.I)
"""Where what is said of a subject ends: a sentence, or a contrast (`val loss rises while train loss falls`)."""
_MESSAGE = re.compile(r"\bdid not improve (?:from|in the last)\b|\bimproved from\b", re.I)
"""A checkpoint or early-stopping callback's routine line (Keras' `val_loss did not improve from 0.45`,
Lightning's `did not improve in the last 3 records`): one epoch without a new best, no report."""
_CODE = re.compile(r"\b\w+=[\w\[(.'\"]+.*\bif\b.*\belse\b|"
                   r"^\s*(?:def |class |import |from \S+ import|//|[\w.]+\(.*\)[,:]?\s*$|(?:if|elif|for|while)\s[^,，]*[<>=()\[\]:]|"
                   r"return |raise |assert |"
                   r"[\w.\[\]'\"]+\s*[-+*/]?=\s)|[=(]\s*\w*loss\w*\s*[,)]|\{\s*['\"]?\w+['\"]?\s*:")
_NOT_LM = re.compile(objectives.named(objectives.LM_RL + objectives.PREFERENCE, "reward", r"rewards/\w+", "kl"), re.I)
"""An objective that is not a language-model loss, or its metrics: a GRPO loss grows with the KL, a DPO loss
starts at ln 2 and a reward at 0; in words they say nothing of a language model's loss. Bounded by ASCII word
characters: Chinese beside it is no word of its own (`做dpo训练时，loss没有下降反上升`)."""
_ADVERSARIAL = re.compile(r"(?<![A-Za-z0-9_])(?:discriminator|generator(?:'s)?[ _]loss|GANs?|adversarial|"
                          r"feature[ _-]?(?:matching|loss)|"
                          r"[dg]_loss|loss_[dg]|mel[ _-]?gan|hifi-?gan|cycle-?gan|判别器|生成器)(?![A-Za-z0-9_])", re.I)
"""A GAN's losses: the generator's and the discriminator's move against each other (the adversarial and
feature-matching losses rise as the discriminator learns, a balanced discriminator sits at 0.5 or ln 2); in words,
their rise or standstill says nothing of whether the model learns (HiFi-GAN#59, ParallelWaveGAN#226). Not a bare
`generator`: Keras' data generators (`fit_generator`) feed models whose loss does report."""
REWARD_STILL = re.compile(r"\brewards?\b[^.!?\n]{0,25}?\b(?:stay\w*|stuck|remain\w*|(?:is|are|was|were)\s+(?:always\s+|"
                          r"all\s+|still\s+|just\s+)?)\s*(?:at\s+|around\s+)?(?:0(?:\.0+)?(?![\d.])|zero)|"
                          r"\brewards?\b[^.!?\n]{0,25}?(?:\bnever|\bnot|n't)\s+(?:\w+\s+)?(?:increas\w*|improv\w*|"
                          r"go(?:es)?\s+up|ris\w*|chang\w*|mov\w*|grow\w*)|"
                          r"(?:reward|奖励)\s*(?:值)?\s*(?:一直|始终|都|总是)\s*(?:是|为|在|等于)?\s*0(?![.\d])|"
                          r"(?:reward|奖励)\s*(?:值)?\s*(?:一直|始终|都)?\s*(?:不|没有?)\s*(?:涨|增长|上升|提高|提升|变化)", re.I)
"""The reward itself said to stand at zero or never rise (`both the rewards stay at 0 and the loss never goes down`,
trl#1311): the measure an RL or preference objective is judged by says nothing is learned, so the words are no RL
excuse for the loss beside them."""
_WORDS = ("loss", "损失", "acc", "准确率", "正确率", "model", "network", "net", "lora", "adapter", "classifier",
          "train", "tun", "run", "模型", "训练", "weight", "param", "grad", "梯度", "权重", "参数", "learning rate", "lr",
          "学习率", "predict", "output", "always", "only", "updat", "ppl", "perplex", "困惑度", "converg", "learning",
          "progress", "improvement")


_ACC_HIGH = re.compile(r"\s*(?:\w+\s+)?(?:reach\w*|hits?|gets? to|goes? to|is|was|of)\s+(?:over\s+|above\s+)?"
                       r"(?:(?:9\d|100)(?:\.\d+)?\s*%|0\.9\d*)", re.I)
_ASKED_IS = re.compile(r"\b(?:is|was|are|were)\s+(?:my|the|our|this)?\s*(?:train(?:ing)?\s+)?$", re.I)
_ZERO_AFTER = re.compile(r"\s*(?:always\s+|still\s+|exactly\s+)?(?:0(?:\.0+)?|zero)(?![.\d]|[A-Za-z])", re.I)
_NOUN_RISE = re.compile(r"(?<!\bno )(?<!\bany )\b(?:increase|rise|spike|jump|surge|explosion|blow-?up|divergence)s?\s+"
                        r"(?:of|in)\s+(?:both\s+)?(?:the\s+|my\s+)?$", re.I)
"""A rise named as a noun before the loss it happened to (`a sudden spike in the training loss`)."""
_SMALL_BEFORE = re.compile(r"\b(?:only|just|merely)\s+(?:\w+\s+)?$", re.I)
_SMALL_AFTER = re.compile(r"\s+(?:only\s+)?(?:very\s+)?(?:slightly|a tiny bit|a little bit|a bit|a little|very little|"
                          r"marginally|by (?:only )?0\.0)", re.I)
"""A fall said to be too small: `only decreased from 0.7 to 0.6`, `decreases only slightly`, `a tiny bit`."""
_WISH = re.compile(
    r"\b(?:how|what)\b[^.?!]{0,40}?\b(?:make|get|help|let)\s+(?:the\s+|my\s+|this\s+|our\s+)?"
    r"(?:train(?:ing)?\s+)?(?:loss|model|network|training)\s+(?:to\s+)?(?:converge|decrease|go down|drop|fall|learn)|"
    r"\b(?:how|what)\b[^.?!]{0,40}?\bso (?:that )?(?:the |my )?(?:loss|model|network|training)\s+(?:will |can |would )?"
    r"(?:converge|decrease|go down|drop|learn)|"
    r"(?:如何|怎么|怎样)[^。？！?!]{0,20}(?:让|使)[^。？！?!]{0,6}(?:loss|损失|模型)[^。？！?!]{0,6}(?:收敛|下降|降下来)",
    re.I)
"""A request to make the loss fall or the model converge: asked because it does not (`how can I make the loss
converge?`, `让损失可以收敛`); not a wish for a faster fall."""
_FASTER = re.compile(r"\w*\s+(?:faster|quicker|more quickly|further|even lower|more)\b|\w*\s*(?:更快|更低)", re.I)
_AS_FAST = re.compile(r"\s+(?:as|so)\s+(?:fast|quickly|rapidly|much|steeply|smoothly)\s+as\b", re.I)
"""A fall compared with another's pace (`not decreasing as fast as with the old version`)."""
_HEDGED = re.compile(r"\b(?:probably|possibly|maybe|perhaps|might|may|likely|unlikely)\b", re.I)
"""Between a subject and its predicate: only a guess (fairseq's `Your loss is probably exploding` beside its fp16
floor)."""
_INSTEAD = re.compile(r"(?:instead of|rather than|than|after|before|since|expected\s+(?:it|the loss)\s+to|should)\s*$",
                      re.I)
"""A predicate only named as what did not happen (`increasing instead of decreasing`)."""
_PASSIVE = re.compile(r"\bbe\s+$", re.I)
_PERSON = re.compile(r"\b(?:i|we|you|they)\s+(?:\w+\s+)?$", re.I)
"""A person is the verb's subject (`the loss became nan after we increased the batch size`)."""
_PRE_NEGATED = re.compile(r"(?:n't|\bnot)\s+(?:\w+\s+){0,2}$", re.I)
"""A question's negation before its subject: `why doesn't the training loss decrease?`."""
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?![A-Za-z0-9_%]|\.\w|\s*(?:%|x\b|times|epochs?|steps?|iter\w*|"
                     r"k\b|hours?|h\b|min\w*|s\b|sec\w*|days?|[GM]i?B|samples|examples|tokens|classes|GPUs?)\b)",
                     re.I)
"""A value in prose, not a count of epochs, steps or time, not a percentage."""
_BEFORE_NUMBER = re.compile(r"(?:epoch|step|iter\w*|batch|lr|size|rank|gpu|after|for|every|#|of)\s*$", re.I)
SAID_RISE = 1.2
"""A rise a person reports in numbers: a fifth above the lowest they name (they chose them to show it)."""


@dataclass(frozen=True)
class Said:
    kind: str  # flat, zero, rise, overfit (a validation loss rising); or quiet: a predicate read that reports no such
    # thing (a fall, a denial)
    subject: str  # loss, val_loss, acc, model, still, lr, pred


QUIET = Said("quiet", "")


def mentions(line: str) -> bool:
    """Whether a line names a subject this reader reads (a cheap test before the regular expressions)."""
    lowered = line.lower()
    return any(word in lowered for word in _WORDS)


_OF_SET = re.compile(r"\b(?:the\s+)?loss(?:es)?\s+(?:of|on)\s+(?:the\s+|my\s+)?(?P<set>train(?:ing)?|valid(?:ation)?|val|"
                     r"test|dev|eval(?:uation)?)\s+(?:set|data(?:set)?|split)\b", re.I)
"""A loss named by its set (`the loss of the training set goes down, the loss of the valid set goes up`), read as the
training or validation loss it is."""


def _set_loss(m: re.Match[str]) -> str:
    return "the training loss" if m.group("set").lower().startswith("train") else "the validation loss"


@functools.lru_cache(maxsize=8)
def read(line: str) -> Said | None:
    """What the line says the training loss does: flat, zero or rise; QUIET when it reads a subject and a
    predicate that report none of these (a fall, a denial, a supposition, a validation loss rising while the
    training loss falls, a callback's routine line); None when it reads nothing."""
    if len(line) > 1000 or not mentions(line):
        return None
    if _CODE.search(line) or _MESSAGE.search(line):
        return QUIET
    line = _OF_SET.sub(_set_loss, line) if "loss" in line.lower() else line
    line, swings = _SWINGS.subn("fluctuates", _BOTH.sub(r"\g<a> \g<loss> and \g<b> \g<loss>", line))
    wish = _WISH.search(line)
    if wish is not None and not _FASTER.match(line, wish.end()):
        return Said("flat", "loss")
    previous = [""]
    found = [said for sentence in _SENTENCE.split(line) if sentence and sentence.strip()
             for said in _sentence(sentence, previous)]
    if _ADVERSARIAL.search(line):  # a GAN's losses: their moves in words are no verdict on learning
        found = [Said("quiet", s.subject) if s.subject == "loss" and s.kind != "fall" else s for s in found]
        previous[1:] = []
    if _values_rose(line, previous[1:]):  # `was about 100 ... dropped to 70, but it suddenly became 800,000`
        return QUIET if TRANSIENT.search(line) else Said("rise", "loss")  # `went up to 21, then started coming down`
    if any(s.kind == "fall" and not s.subject.startswith("val") for s in found):
        # the training loss falls (or the training accuracy climbs, the model learns): only the training loss
        # itself, its accuracy or the model can then be said to stand still or rise (`the loss converges quickly
        # but the accuracy stays at 0`); a validation loss that stays or rises is overfitting, a learning rate at
        # 0 a warm-up's first steps
        found = [s for s in found if s.subject in ("loss", "acc", "model") or s.kind == "overfit"]
    if any(s.kind == "overfit" for s in found) and _METRIC_BETTER.search(line):
        found = [s for s in found if s.kind != "overfit"]  # the metric improves: keep training (wav2letter#879)
    if not found and swings:
        return QUIET  # a swing, which the narrower readers would take for the rise or the fall inside it
    if not found:
        one = _STANDSTILL.search(line)
        if one and "progress" in one.group(0).lower() and _NOT_TRAINING.search(line) and not _TRAINING.search(line):
            return None  # a build, an install or a download that makes no progress: not a loss standing still
        if one and not _supposed(line[:one.start()]):
            return Said("flat", "pred")
        return QUIET if _NOT_A_VALUE.search(line) else None
    said = _gravest(found, line)
    if said.kind == "flat" and said.subject == "loss" and (_levelled(previous[1:]) or _SLOWING.search(line)):
        return QUIET  # a fall that levels off at a learned value, or a fall said to slow: the curve's usual shape
    return said


_AT_LN2 = re.compile(r"(?<![\d.])0\.693\d*")
"""A pairwise preference loss (DPO, a reward model) at ln 2: the chosen and the rejected are scored alike, the
policy is the reference; said to stay there, nothing is learned (trl#1627: `DPO loss remains 0.6931 from the first
step`). Any other value of such a loss said to stay says nothing of learning."""
_START_ONLY = re.compile(r"\b(?:at|in) the (?:very )?(?:start|beginning)\b|\bat first\b|\binitially\b|\bfor the first\b|"
                         r"\bduring (?:the )?warm-?up\b|一开始|刚开始|开始时", re.I)
"""Said of the start only (`stays at 0.693 at the start`): where a preference loss begins, not where it stays; `from
the first step` is since the start, and goes on."""
_SLOWING = re.compile(
    r"\b(?:is|are)\s+(?:\w+\s+)?(?:becoming|getting|starting to (?:get|become|go|look))\s+(?:\w+\s+)?(?:flat|flatter)\b|"
    r"\b(?:starts?|starting|begins?|beginning)\s+to\s+(?:flatten|plateau|level off|converge|slow)|"
    r"\b(?:is|are)\s+(?:\w+\s+)?flattening\b|逐渐(?:变)?平(?:缓|稳)|趋于平(?:缓|稳)|开始(?:变)?平",
    re.I)
"""A fall said to slow (`the loss is becoming flat`, `starts to plateau`, `趋于平缓`): the shape of every loss curve
that has learned, not a loss that does not move (OLMo#497: at perplexity 20 after the warm-up)."""
LEVELLED_BY, LEVELLED_MAX = 0.85, 4.0
"""A plateau 15% or more below where the loss started, at a value a model that learned reaches (under 4: a language
model's loss above that is near its unigram entropy), and not at chance (ln k for a few classes)."""


_METRIC_BETTER = re.compile(
    r"\b(?:WER|CER|PER|error rate)s?\b[^.!?]{0,30}?\b(?:decreas\w*|drop\w*|go(?:es|ing)? down|went down|fall\w*|"
    r"improv\w*|descend\w*|declin\w*)|"
    r"\b(?:acc(?:uracy)?|BLEU|F1|mAP|AUC|ROUGE[\w-]*|metrics?|scores?)\b[^.!?]{0,30}?\b(?:increas\w*|ris(?:e|es|ing)\b|"
    r"go(?:es|ing)? up|went up|improv\w*)", re.I)
"""A metric said to improve beside a validation loss said to rise (`the validation loss is increasing, the WER keeps
decreasing`): the maintainers say this is no overfitting (the loss and the metric measure different things): keep
training (wav2letter#879's answer)."""


def _levelled(scopes: list[str]) -> bool:
    """The loss's clauses name where it started and a lower value where it stays: it fell, then levelled off
    (LlamaFactory#987: `开始loss为1.9，几十个step之后就在1.5附近不再下降`)."""
    printed = [m.group(1).replace(",", "") for scope in scopes if not _RANGE.search(scope)
               for m in _VALUE.finditer(scope)]
    values = [float(p) for p in printed]
    if len(values) < 2 or not 0 < values[-1] <= LEVELLED_BY * values[0] or values[-1] >= LEVELLED_MAX:
        return False
    exact = len(printed[-1].partition(".")[2]) >= 3  # `0.6931`, not `about 1.1` (which only rounds near ln 3)
    return not (exact and any(abs(values[-1] - math.log(k)) <= 0.003 * math.log(k) for k in range(2, 11)))


def _values_rose(line: str, scopes: list[str]) -> bool:
    """The values told of the loss's clauses (not a range, not a line of logged records) end far above the lowest
    before them."""
    if len(_RECORD.findall(line)) >= 2:
        return False
    values = [float(m.group(1).replace(",", "")) for scope in scopes if not _RANGE.search(scope)
              for m in _VALUE.finditer(scope)]
    return len(values) >= 2 and values[-1] >= SAID_RISE * min(values[:-1]) and values[-1] - min(values[:-1]) >= 0.05


def _gravest(found: list[Said], line: str) -> Said:
    """The gravest of what the clauses say, once a later fall has ended an earlier standstill; QUIET when that is
    a passing rise or a standstill within an epoch."""
    if any(s.kind == "fall" and s.subject == "loss" for s in found[1:]):
        # a standstill of the loss that a later clause ends (`did not decrease for the first 50 steps but then
        # started dropping`, `fluctuating between 0.8 and 1.2 but trending down`): where it went last counts
        last_fall = max(i for i, s in enumerate(found) if s.kind == "fall" and s.subject == "loss")
        found = [s for i, s in enumerate(found) if not (s.kind == "flat" and s.subject == "loss" and i < last_fall)]
    for kind in ("rise", "zero", "flat", "overfit"):  # the gravest: `stopped decreasing, then the training loss grew`
        said = next((s for s in found if s.kind == kind), None)
        if said is not None:
            if (kind == "rise" and TRANSIENT.search(line)) or (kind == "flat" and _WITHIN_EPOCH.search(line)):
                return QUIET
            return said
    return QUIET


def _sentence(sentence: str, previous: list[str]) -> list[Said]:
    """What each subject of one clause is said to do, in order; `previous` holds the subject named last in the
    line, which `it` stands for (`dropped to 70, but it suddenly became 800,000`), and which a Chinese clause with
    no subject goes on about (`一开始loss下降，后来就不降了`)."""
    if _COMPARED.match(sentence):
        return []  # `对比直接在qwen上面增量预训练依然在下降`: another run, told as the reference
    subjects = [m for m in _SUBJECT.finditer(sentence)
                if not m.group("proc") or _OPENS.search(sentence[:m.start()])]  # `is not training`: a verb
    if not subjects and previous[0] in ("loss", "model", "val_loss") and (_CJK.search(sentence) or
                                                                       _GOES_ON.match(sentence)):
        said = _predicate(previous[0], sentence[:80], False)
        return [said] if said is not None and not _supposed(sentence) else []
    found = []
    for i, m in enumerate(subjects):
        subject = _kind(m) if not m.group("it") else previous[0]
        if not subject or _SHOT.search(sentence[:m.start()]):
            continue  # `zero-shot accuracy is 0.0`: an evaluation of a model before (or without) training
        previous[0] = subject
        later = [n for n in subjects[i + 1:] if not n.group("it")]
        end = later[0].start() if later else len(sentence)
        scope = sentence[m.end():end]
        if later and _JOINED.fullmatch(scope) and _kind(later[0]):  # `the train loss and val loss didnot decrease`:
            # one predicate (not `it, kl_coef is 0`: another quantity)
            scope = sentence[later[0].end():later[1].start() if len(later) > 1 else len(sentence)]
        if subject == "loss" and not _PPL.match(m.group(0)):
            previous.append(scope[:80])  # what is said of the training loss, for its values
        said = _predicate(subject, scope[:80], _PRE_NEGATED.search(sentence[:m.start()]) is not None)
        if said is None and subject == "loss" and _NOUN_RISE.search(sentence[:m.start()]):
            said = Said("rise", subject)  # `a sudden spike in the training loss`
        if said is None and subject == "loss" and _ASKED_IS.search(sentence[:m.start()]) and _ZERO_AFTER.match(scope):
            said = Said("zero", subject)  # `why is my loss 0?`: the verb before its subject, as a question puts it
        if said is None:
            continue
        supposed = _supposed(sentence[:m.start()]) or \
            (_NOT_LM.search(sentence) and subject.removeprefix("val_") in ("loss", "still") and
             not REWARD_STILL.search(sentence) and
             not (said.kind == "flat" and _AT_LN2.search(scope[:80]) and not _START_ONLY.search(sentence)) and
             not (said.kind == "rise" and (_huge(scope) or _BLEW.search(scope[:80]))) and  # a million or more, or
             # a loss said to explode or diverge, is no objective's normal course
             not (said.kind == "flat" and subject == "still"))  # no gradient, weights unmoved: whatever the objective
        found.append(Said("quiet", subject) if supposed and said.kind != "fall" else said)
    return found


TRANSIENT = re.compile(
    r"\b(?:but|then|and|before|quickly|soon|immediately)\b[^.!?。！？]{0,40}?(?<!not )(?<!n't )(?<!never )(?<!no )"
    r"\b(?:recover\w*|(?:comes?|came|goes|went|gets?|got|drops?|dropped|falls?|fell)\s+back\b|returns?\s+to\b|"
    r"(?:drops?|dropped|falls?|fell|decreas\w*|goes down|went down|comes down|came down)\s+again\b|"
    r"settl(?:e|es|ed|ing)\b|stabili[sz]\w*|"
    r"(?:start(?:s|ed)?|began|begins?)\s+(?:to\s+)?(?:(?:come|coming|go|going)\s+down|decreas\w*|dropping|drop|"
    r"falling|fall)\b)|"
    r"\b(?:at|in|near|around)\s+the\s+(?:start|beginning|end|first steps?)\s+of\s+(?:each|every)\b|"
    r"\bevery time (?:a |the )?(?:new )?epoch\b|\bperiodic\w*|每(?:个|一)?\s*(?:epoch|轮)\s*(?:开始|结束)|"
    r"(?:然后|之后|随后|又|再)\s*(?:恢复|回落|降回|下降回)",
    re.I)
"""A rise said to pass: a spike that recovers, comes back down or settles, or a jump that recurs at each epoch's
start (data order, an epoch boundary): a transient, not divergence (`the loss spikes occasionally but recovers`)."""
_BOTH = re.compile(r"\b(?P<a>train(?:ing)?|val(?:id(?:ation)?)?|eval(?:uation)?|test)\s*(?:and|&|/|as well as)\s*"
                   r"(?P<b>train(?:ing)?|val(?:id(?:ation)?)?|eval(?:uation)?|test)\s+(?P<loss>loss(?:es)?)\b", re.I)
"""`training and validation loss`: two losses, the training loss one of them (read as `training loss and validation
loss`, so that what is said of both is said of the training loss too)."""
_DOWN = r"(?:decreas\w*|declin\w*|fall\w*|dropp?\w*|go(?:es|ing)? down|went down)"
_UP = r"(?:increas\w*|ris(?:e|es|ing)|go(?:es|ing)? up|went up)"
_SWINGS = re.compile(
    rf"(?:\bnot|n't)\s+(?:\w+\s+)?monoton\w*(?:\s+{_DOWN})?|(?:\bnot|n't)\s+{_DOWN}\s+(?:\w+\s+)?monoton\w*|"
    rf"\b{_DOWN}\s*(?:/|&|\band\b|\bor\b)\s*{_UP}\b|\b{_UP}\s*(?:/|&|\band\b|\bor\b)\s*{_DOWN}|"
    r"(?:上が|下が|増え|減)っ?たり\S{0,4}?(?:上が|下が|増え|減)っ?たり|"
    r"(?:올라|내려)(?:갔다|가다)\s*(?:올라|내려)(?:갔다|가다)|"
    r"(?:\b(?:always|constantly|keeps?|kept|keeps? on)\s+)?(?:jump|bounc)(?:ing|ed|es|e|s)?\s+"
    r"(?:around|about|back and forth|up and down)\b|"
    r"\b(?:always|constantly|keeps?|kept|keeps? on)\s+(?:jump|bounc)(?:ing|ed|es|e|s)?\b(?!\s+(?:up|higher|to)\b)",
    re.I)
"""A loss said to swing, not to move one way: `not monotone decreasing`, `does not decrease monotonically`,
`decreasing/increasing`, `increases and decreases`, `always jumping`, `bouncing around`, Japanese
`上がったり下がったり`, Korean `올라갔다 내려갔다`. Every
minibatch loss swings; what a maintainer reads from it is
noise (ViLT#7, unsloth#854: both settled as normal), not a rise or a standstill. Read as `fluctuates`, which says
nothing unless a level follows (`fluctuates around 2.3`). `decreases and then increases` is a rise and stays one."""
_COMPARED = re.compile(r"\s*(?:对比|相比|比较|而|in comparison|by comparison|compared (?:to|with)|in contrast|unlike|"
                       r"(?:while|whereas) (?:with|using|on|in|for) )", re.I)
"""A clause that opens on a comparison tells of another run (`对比直接在qwen上面增量预训练依然在下降`, `compared with
full fine-tuning, it keeps falling`): what it says is no report of this run's loss."""
_WITHIN_EPOCH = re.compile(r"\bwithin (?:each|every|an?|one|the same|a single) epoch\b|"
                           r"\b(?:when|as|once) (?:starting |it starts |we start )?a new epoch\b|"
                           r"\bat (?:the start of )?(?:each|every) new epoch\b|每个\s*epoch\s*(?:内|之内|里)", re.I)
"""A standstill said to hold within each epoch, the loss dropping as a new one starts: the staircase of a multi-epoch
run on a small dataset (each epoch revisits what the model has seen), not a loss that does not move (THUDM/GLM#88)."""
_PPL = re.compile(r".*(?:ppl|perplexity|困惑度)", re.I)
_RECORD = re.compile(r"[:=|]\s*-?\d|\w\s+-?\d[\d.eE+-]*\s*\|")
"""A log record's cells (`loss=9.512, ppl=730.1`, `| loss 7.312 | ppl 158.9 |`): their numbers are no history a
person tells; the loss watch reads them."""
_JOINED = re.compile(r"\s*(?:and|&|,|or|as well as|both|和|与|以及|跟)?\s*(?:the\s+|my\s+)?", re.I)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_GOES_ON = re.compile(r"\s*(?:(?:then|and|still|just|only|even|later|soon|suddenly|quickly|it)\s+){0,2}(?=\S)"
                      r"(?:(?:\w+ly|again|then)\s+)?(?:(?:start(?:s|ed)?|began|begins?)\s+(?:to\s+)?)?"
                      r"(?:" + _RISE + "|" + _STILL + "|" + _FALL + ")", re.I)
"""A clause that opens on its verb: it goes on about the subject before (`goes up and down, but trends
downward`)."""


def _supposed(before: str) -> bool:
    """Whether the subject sits in a clause that only supposes (`if the loss explodes, ...`); after that clause's
    comma it is the main clause, a report of what happens in that case (`if I train LoRA, the loss becomes 0`)."""
    found = None
    for found in _SUPPOSED.finditer(before):
        pass
    return found is not None and not re.search(r"[,，]", before[found.end():])


_SHOT = re.compile(r"(?<![A-Za-z])(?:zero|few|one|\d+)[- ]?shot\s+(?:[A-Za-z]+\s+){0,2}$", re.I)
"""Before a subject: a zero- or few-shot evaluation's (`zero-shot accuracy`, `the 5-shot eval loss`), no training's."""
_AT_ZERO = re.compile(r"\s*(?:[:=]|is|was|are|were|stays?|stayed|remains?|remained|stuck|sits?|sat|stands?|"
                      r"(?:at|around|on)\b|\s)*(?:0(?:\.0+)?|zero)(?![.\d]|[A-Za-z])", re.I)
"""The level a standstill is said at, when it is 0 (`loss: 0 all the time`, `stuck at 0`): a zero loss."""


_OPENS = re.compile(r"(?:^|\b(?:the|my|our|this|whole|and|so|then)|[,:(])\s*$", re.I)
"""Before `training` or `run` as a subject (`Training diverges`, `the run diverged`), not as a verb (`the network is
not training`) or a time (`during training`)."""


def _kind(m: re.Match[str]) -> str:
    if m.group("other"):
        return ""
    name = next(k for k in ("loss", "acc", "model", "still", "lr", "pred") if m.group(k)) if not m.group("proc") \
        else "model"
    return "val_" + name if m.group("val") else name


_STUCK_ALONE = re.compile(r"stuck\b(?!\s+(?:at|around|on|near)\s+~?\d(?![\d.]*\s*%))", re.I)
"""`stuck` said of the run or the model with no level after it (`training stuck`, `stuck at step 500`, `stuck at 0%`):
a run that makes no progress, not a loss that stands still (`the model is stuck at 2.3` is one)."""


def _predicate(subject: str, scope: str, negated_before: bool) -> Said | None:
    """The last thing said of `subject` in `scope` (the text after it, up to the next subject or the clause's
    end), with the negation since the subject or the previous predicate."""
    if subject == "acc" and _ACC_HIGH.match(scope):
        return Said("fall", subject)  # `training accuracy reaches 99%`: the model learns
    if _NOTHING.search(scope):
        return Said("flat", subject)
    if subject == "lr":
        return Said("flat", subject) if any(p.lastgroup == "zero" for p in _PREDICATE.finditer(scope)) else None
    last, start, at, rose = None, 0, 0, False
    for p in _PREDICATE.finditer(scope):
        if _INSTEAD.search(scope[:p.start()]) or (p.group(0).endswith("ed") and _PASSIVE.search(scope[:p.start()])) \
                or _PERSON.search(scope[:p.start()]):
            continue  # `increasing instead of decreasing`; `cannot be moved to a device`: a capability, no history;
            # `after we increased the batch size`: the person's doing, to a setting
        at = p.start()
        negated = _negated(scope[start:p.start()]) or _negated_after(scope[p.end():]) or \
            (last is None and negated_before)
        last, start = (p.lastgroup, negated), p.end()
        rose = rose or (p.lastgroup == "rise" and not negated)
    if rose and last is not None and last[0] != "rise" and _ALTERNATES.search(scope):
        last = ("rise", False)  # `一会儿变得很大，一会儿变成0`: by turns, not in order; the rise is the graver
    if rose and last == ("fall", True):
        last = ("rise", False)  # `increases and never decreases`: the fall denied is the rise going on
    if subject == "loss" and _huge(scope):
        return Said("rise", subject)  # `Perplexity 16063139.21`: no run that learns prints it
    if last is None:
        kind = _numbers(scope) if subject == "loss" else ""
        return Said(kind, subject) if kind else None
    verb, negated = last
    if _HEDGED.search(scope[:start]):
        return Said("quiet", subject)
    if verb == "still" and subject == "model" and not negated and _STUCK_ALONE.match(scope[at:]):
        return Said("quiet", subject)  # `training stuck` with no level: a run that hangs, not a loss standing still
    if verb == "fall" and not negated and subject.endswith("loss") and (_SMALL_BEFORE.search(scope[:at]) or _SMALL_AFTER.match(scope[start:])):
        return _for(subject, "flat")  # `only decreased from 0.7 to 0.6`: a fall reported as too small
    if verb == "rise" and not negated and subject.endswith("loss") and _SMALL_AFTER.match(scope[start:]):
        return Said("quiet", subject)  # `increased a bit at the end`: a rise reported as small is no divergence
    if verb == "fall" and negated and _AS_FAST.match(scope[start:]):
        return Said("quiet", subject)  # `does not decrease as fast as before`: a slower fall, still a fall
    kind = {("still", False): "flat", ("fall", True): "flat", ("rise", False): "rise",
            ("zero", False): "zero", ("fall", False): "fall"}.get((verb, negated), "quiet")
    if kind == "flat" and subject == "loss" and _AT_ZERO.match(scope):
        kind = "zero"  # `loss: 0 all the time`, `stuck at 0`: a loss that stays at zero is a zero loss
    return _for(subject, kind, scope[at:start])


_ALTERNATES = re.compile(r"(一会儿?|时而|有时候?).{1,30}?\1|\bsometimes\b.{1,60}?\bsometimes\b|"
                         r"\bone (?:moment|minute|step)\b.{1,60}?\b(?:the )?next\b", re.I)
"""Two states said by turns (`一会儿变得很大，一会儿变成0`, `sometimes it explodes, sometimes it is 0`): the loss goes
back and forth between them, so the last said is not where it went."""
_KEYED_VALUE = re.compile(r"\w*\s*[:=]")
HUGE = 1e6
"""A loss or perplexity said or printed at a million or more: a perplexity past any vocabulary's uniform guess
(ln 250k = 12.4), a loss no real data gives; the updates blew up."""


def names_huge(text: str) -> bool:
    """Whether the text names a value of a million or more (`grows to 1e18`): no objective's normal value."""
    return any(float(m.group(1)) >= HUGE for m in _NUMBER.finditer(text[:2000]))


def _huge(scope: str) -> bool:
    if _KEYED_VALUE.match(scope):
        return False  # `loss: 2461733416.9`, `loss_cls=...`: a log record's key, whose numbers the loss watch reads
    return any(float(m.group(1)) >= HUGE for m in _NUMBER.finditer(scope[:40])
               if not _BEFORE_NUMBER.search(scope[:m.start()]))


def _negated(gap: str) -> bool:
    """A negation that binds the predicate after it: at most four words away, no comma between (`does not seem
    to be decreasing`; not `is not loaded, reducing memory`)."""
    found = None
    for found in _NEGATION.finditer(gap):
        pass
    return found is not None and _CLOSE.fullmatch(gap[found.end():]) is not None


_CLOSE = re.compile(r"(?:\s*[\w'’]+){0,4}\s*|[^,，;；]{0,6}")


def _negated_after(rest: str) -> bool:
    """`not stuck anymore`: a negation may also close the clause."""
    return re.match(r"\s*(?:anymore|any more)\b", rest, re.I) is not None


def _numbers(scope: str) -> str:
    """The loss's values named one after another in prose: three or more the same in a row (`2.302 2.302 2.302`)
    is flat; joined by words of a sequence (`was 0.3, now it's 4.5`, `1.2 -> 3.4 -> 8.9`), the last a fifth above
    the lowest before it is a rise. Not a log line's cells (`Loss 6.9074 (6.9080)`, `loss: 10.37  time: 0.49`)."""
    if _RANGE.search(scope):
        return ""  # `in the range of 0.1 to 0.5`, `between 2 and 3`: bounds, not a history
    found = [m for m in _NUMBER.finditer(scope) if not _BEFORE_NUMBER.search(scope[:m.start()])]
    values = [float(m.group(1)) for m in found]
    joins = [scope[a.end():b.start()] for a, b in zip(found, found[1:])]
    if len(values) >= 3 and len(set(values)) == 1 and all(_LISTED.fullmatch(j) for j in joins):
        return "flat"
    if len(values) == 1 and _EVERY.match(scope, found[0].end()):
        return "flat"  # `is 2.302 at every epoch`: one value, said of each epoch
    if len(values) >= 2 and all(_THEN.search(j) for j in joins) and values[-1] >= SAID_RISE * min(values[:-1]) \
            and values[-1] - min(values[:-1]) >= 0.05:
        return "rise"
    return ""


_EVERY = re.compile(r"\s*(?:at|in|for|after|on)\s+(?:every|each|all)\s+(?:the\s+)?(?:epochs?|steps?|iter\w*|batch\w*|"
                    r"runs?|evaluations?)\b|\s*(?:in\s+)?每(?:个|一)?\s*(?:epoch|轮|步|step)", re.I)
"""After a value: said of every epoch or step (`the loss is 2.302 at every epoch`)."""
_VALUE = re.compile(
    r"(?:^\s*|(?:\b(?:was|is|of|at|from|to|became|becomes|become|reached|reaches|hit|below|above|under|starts?|"
    r"started|began|begins)|['’]s)\s+|"
    r"(?:从|到|至|在|变成了?|变为|升到|涨到|达到|跳到|为|是)\s*)"
    r"(?:about\s+|around\s+|~\s*)?"
    r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![.,]?\d)"
    r"(?!\s*(?:st|nd|rd|th)\b|\s*%|\s*(?:x|times|epochs?|iter\w*|steps?|k|hours?|h|min\w*|s|sec\w*|days?)\b)", re.I)
"""A value the training loss is said to be or to reach (`was about 100`, `dropped to 70`, `became 800,000`); not an
ordinal, a percentage, a count of epochs or steps, a time."""
_WALL_TIME = (r"\s+(?:for|in|after|since|over|within)\s+(?:an?\s+|the\s+(?:last|past)\s+|\d+\s*|several\s+|many\s+|"
              r"half\s+an?\s+)?(?:hours?|hrs?|h|min(?:ute)?s?|seconds?|secs?|days?|while)\b")
"""A span of wall time after `no progress` (`for an hour`, `in 30 minutes`): the run does not advance."""
_STANDSTILL = re.compile(
    r"\b(?:always|only|just)\s+(?:predicts?|predicting|predicted|outputs?|outputting|classif(?:ies|y))\s+(?:the\s+)?"
    r"(?:same|majority|one|a single|first|last|class|label|0|1|zeros?|ones?)\b|"
    r"(?:n't|\bnot|\bnever)\s+(?:\w+\s+)?updat\w*\s+(?:the\s+|any\s+|my\s+)?(?:weights|param\w*|model|adapter)|"
    r"(?<!with )\b(?:no|without(?: any)?)\s+(?:sign of\s+|real\s+)?(?:convergence|learning|improvement|"
    r"progress(?!" + _WALL_TIME + r"))\b(?!\s+(?:signal|rate))|"
    r"\b(?:constant|stagnant|unchanging)\s+(?:(?:train(?:ing)?|val(?:idation)?|eval)\s+)?loss(?:es)?\b"
    r"(?![\s_-]*(?:scal|weight|coef|function|term))",
    re.I)
"""With no subject read: a classifier said to answer one class (`it always predicts the majority class`), an
update said not to happen (`the optimizer doesn't update the weights`), a loss named constant before its noun
(`all of them lead to constant losses`). Not `no progress` over wall time (`no
progress for an hour`): a run that does not advance, a hang, not a loss that stands still."""
_NOT_TRAINING = re.compile(r"\bBuilding wheel|\bsetup\.py\b|\bpip install\b|\b(?:compil|install|download|upload)\w*|"
                           r"编译|安装|下载", re.I)
"""Work other than training that a line can say makes `no progress` (omniparse's flash-attn wheel: `it still gets
stuck at 'Building wheel for flash-attn (setup.py)' without any progress`), in a line that says nothing of training."""
_TRAINING = re.compile(r"train|epoch|loss|learn|fine-?tun|训练|微调", re.I)
_NOT_A_VALUE = re.compile(r"(?<![A-Za-z])loss(?:es)?\s*[_ ]?(?:of|fn|scal\w*|weights?|mask|type)\b", re.I)
"""The word loss naming no training loss's value (`loss of accuracy`, `loss scale`, `loss_fn`): what is
said after it is said of something else, and the narrower readers must not take it for the loss either."""
_RANGE = re.compile(r"\b(?:range|between|typically|usually|default)\b|之间|范围|区间|上下", re.I)
_LISTED = re.compile(r"\s*(?:[,;/|]|->|→|=>|\.\.\.)?\s*")
_THEN = re.compile(r"->|→|=>|\bto\b|\bnow\b|\bthen\b|\blater\b|\bbecame\b|\bbecomes\b|\bafter\b", re.I)


_UNMOVED = re.compile(r"same|chang|updat|identical|mov|budge|train|learn|变|动|更新", re.I)
"""What weights or gradients must be said to do to mean a loss that does not move: not change, not update."""
_BLEW = re.compile(r"diverg|explo|blow|blew|unstable|发散|爆炸|不稳定", re.I)


def blew_up(text: str) -> bool:
    """Whether the words say a loss blew up (diverges, explodes, unstable), not merely rose."""
    return _BLEW.search(text) is not None


def _for(subject: str, kind: str, verb_text: str = "") -> Said:
    """What a predicate means for the training loss, by its subject: an accuracy or a model that does not improve,
    weights that do not update, gradients or a learning rate at zero all mean a loss that does not move; only a
    training loss or a model rises (an accuracy or a learning rate going up is no divergence); a validation loss
    going up is overfitting."""
    base = subject.removeprefix("val_")
    if base == "acc" and kind in ("rise", "fall"):
        # an accuracy climbing: the model learns; an accuracy falling is no news of the loss
        return Said("fall" if kind == "rise" else "quiet", subject)
    if base == "acc" and kind == "zero":
        return Said("flat", subject)
    if kind == "fall" and base in ("still", "lr", "pred"):
        return Said("quiet", subject)  # the learning rate decays, the weights change: no news of learning
    if kind in ("quiet", "fall"):
        return Said(kind, subject)
    if base == "loss" and kind == "rise" and subject.startswith("val_"):
        return Said("overfit", subject)  # a validation loss going up: overfitting, unless a metric says otherwise
    if base == "loss":
        return Said(kind, subject)
    if (base == "acc" and kind == "flat") or (base == "model" and kind == "flat"):
        return Said(kind, subject)
    if base == "model" and kind == "rise" and verb_text and _BLEW.search(verb_text):
        return Said(kind, subject)  # `training diverged`; a model that `increases diversity` is no divergence
    if base == "still" and kind == "flat" and not _UNMOVED.search(verb_text):
        return Said("quiet", subject)  # a gradient norm that stays around 1.0 is healthy; weights that never change
    if (base in ("still", "pred") and kind in ("flat", "zero")) or (base == "lr" and kind == "zero"):
        return Said("flat", subject)
    return Said("quiet", subject)
