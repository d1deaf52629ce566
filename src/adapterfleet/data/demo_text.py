"""Vocabulary and sentence builders for the demo task suite (shop reviews)."""

from __future__ import annotations

import random

ASPECTS = ("delivery", "product", "price", "service")
ITEMS = (
    "blender", "jacket", "pair of headphones", "desk lamp", "backpack", "kettle", "phone case",
    "coffee grinder", "rain coat", "keyboard", "toaster", "yoga mat", "water bottle", "tent",
)  # fmt: skip
SUBJECTS = {
    "delivery": (
        "the delivery", "the shipping", "the courier", "the delivery of the {item}",
        "the parcel with the {item}", "the shipment", "getting the {item} to my door",
    ),
    "product": (
        "the {item}", "the quality of the {item}", "the {item} itself", "the build of the {item}",
        "the material of the {item}", "this {item}",
    ),
    "price": (
        "the price", "the price of the {item}", "the cost", "what I paid for the {item}",
        "the deal on the {item}", "the price tag",
    ),
    "service": (
        "the customer service", "the support team", "the seller", "the help desk",
        "the agent I spoke to", "the staff at the shop",
    ),
}  # fmt: skip
# (positive, negative) predicates per aspect; none contains a negation word.
PREDICATES = {
    "delivery": (
        ("fast", "quick", "on time", "early", "prompt", "speedy", "punctual", "smooth"),
        ("slow", "late", "delayed", "painfully slow", "late by a week", "sluggish", "chaotic",
         "overdue"),
    ),
    "product": (
        ("sturdy", "well made", "excellent", "solid", "reliable", "beautifully designed",
         "durable", "great"),
        ("flimsy", "broken", "poorly made", "cheap and fragile", "faulty", "disappointing",
         "defective", "useless"),
    ),
    "price": (
        ("fair", "reasonable", "unbeatable", "affordable", "good value", "very fair",
         "budget friendly", "justified"),
        ("too high", "outrageous", "inflated", "overpriced", "steep", "excessive", "absurd",
         "unreasonable"),
    ),
    "service": (
        ("helpful", "friendly", "responsive", "polite", "patient", "kind", "quick to answer",
         "supportive"),
        ("rude", "unhelpful", "slow to answer", "dismissive", "careless", "impatient",
         "unreachable", "useless"),
    ),
}  # fmt: skip
AFFIRMED = (
    "{s} was {a}", "{s} was really {a}", "I found {s} {a}", "{s} turned out to be {a}",
    "honestly, {s} seemed {a}", "in my opinion {s} was {a}", "{s} felt {a}",
    "I thought {s} was {a}", "{s} was pretty {a}",
)  # fmt: skip
NEGATED = (
    "{s} was not {a}", "{s} wasn't {a}", "{s} was never {a}", "I would not say {s} was {a}",
    "{s} did not seem {a}", "I didn't find {s} {a}", "{s} was not at all {a}",
    "I don't think {s} was {a}", "{s} was not really {a}",
)  # fmt: skip
OPENERS = ("", "", "", "Well, ", "To be honest, ", "Overall, ", "So, ", "Hmm, ")
FILLERS = (
    "", "", "", "I ordered this last month. ", "Bought it as a birthday gift. ",
    "This was my second order from this shop. ", "Ordered on a Monday. ",
    "My sister recommended the store. ", "I have used it for two weeks now. ",
)  # fmt: skip
SAME = (" and ", ". Also, ", "; moreover, ", ", and on top of that ", ". Plus, ")
CONTRAST = (", but ", ". However, ", ", although ", "; on the other hand, ", ", yet ")


def clause(rng: random.Random, aspect: str, positive: bool, negated: bool) -> str:
    """One clause about ``aspect`` whose meaning is ``positive``, worded with or without a
    negation (a negated clause uses a predicate of the opposite polarity)."""
    subject = rng.choice(SUBJECTS[aspect]).format(item=rng.choice(ITEMS))
    good, bad = PREDICATES[aspect]
    predicate = rng.choice(bad if positive == negated else good)
    return rng.choice(NEGATED if negated else AFFIRMED).format(s=subject, a=predicate)


def sentence(rng: random.Random, clauses: list[str], contrast: list[bool]) -> str:
    """Join clauses (``contrast[i]``: clause i+1 turns against clause i) into a review."""
    text = clauses[0]
    for nxt, turn in zip(clauses[1:], contrast, strict=True):
        text += rng.choice(CONTRAST if turn else SAME) + nxt
    text = rng.choice(OPENERS) + text
    text = text[0].upper() + text[1:]
    text = _capitalise_after_stops(text)
    return rng.choice(FILLERS) + text + rng.choice((".", ".", "!"))


def _capitalise_after_stops(text: str) -> str:
    parts = text.split(". ")
    return ". ".join(p[:1].upper() + p[1:] for p in parts)


def balanced(rng: random.Random, labels: list[str] | tuple[str, ...], n: int) -> list[str]:
    """``n`` labels, as equal in count as ``n`` allows, in random order."""
    out = [labels[i % len(labels)] for i in range(n)]
    rng.shuffle(out)
    return out
