"""A deterministic generator of a fictional encyclopedia, and questions with known answers.

Names are built from syllables, so no pretrained model knows the answers. Entities:
places (region, river, founding year), people (birthplace, birth year, occupation,
employer) and organisations (founder, headquarters, founding year, field). Each entity
has one article that states its attributes in prose and names the linked entities. Some
people have a namesake of another occupation (a decoy article: `_namesakes`); questions
about them name the occupation.

Questions come in five types: two single-hop (the founder of an organisation; the
birthplace of a person) and three two-hop (the birthplace of an organisation's founder;
the river of a person's birthplace; the founder of a person's employer). Tasks are split
train/dev/eval by the entity a question starts from, so no entity's questions straddle
splits: dev is for choosing checkpoints, eval only for the final report.

    corpus = generate_corpus(seed=0, n_places=60, n_people=160, n_orgs=60)
    tasks = generate_tasks(corpus, seed=0)
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

ONSETS = ["b", "d", "dr", "f", "g", "h", "k", "kr", "l", "m", "n", "p", "r", "s", "st", "t", "th", "v", "w", "z"]
VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou"]
CODAS = ["", "", "n", "r", "l", "s", "th", "m", "k", "nd", "rn"]
OCCUPATIONS = ["composer", "surveyor", "glassmaker", "astronomer", "cartographer", "physician", "weaver", "architect"]
FIELDS = ["shipbuilding", "printing", "glassworks", "astronomy", "cartography", "textiles", "brewing", "mining"]
ORG_KINDS = ["Society", "Company", "Guild", "Institute", "Works", "Foundry"]
REGIONS = ["the North Coast", "the Vale", "the Eastern Marches", "the High Plateau", "the Lowlands"]


@dataclass
class Document:
    doc_id: str
    title: str
    text: str
    kind: str


@dataclass
class Corpus:
    documents: list[Document]
    facts: dict[str, dict] = field(default_factory=dict)  # entity title -> attributes
    names: frozenset[str] = frozenset()  # every generated name word (towns, rivers, people, organisations)

    def by_title(self) -> dict[str, Document]:
        return {d.title: d for d in self.documents}


@dataclass
class TaskSpec:
    external_id: str
    question: str
    answer: str
    qtype: str
    hops: int
    split: str
    entity: str
    evidence: list[str]  # titles of the articles that hold the answer


def _name(rng: random.Random, syllables: tuple[int, int], used: set[str]) -> str:
    while True:
        n = rng.randint(*syllables)
        word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(n))
        word = word.capitalize()
        if word not in used and 4 <= len(word) <= 12:
            used.add(word)
            return word


def generate_corpus(
    *,
    seed: int = 0,
    n_places: int = 60,
    n_people: int = 160,
    n_orgs: int = 60,
    exclude: frozenset[str] = frozenset(),
    namesakes: float = 0.3,
) -> Corpus:
    """A world of `seed`; no generated name word is one of `exclude` (the names of other worlds).
    `namesakes`: the share of the people who founded nothing that get a namesake (0: the worlds
    as they were before namesakes, 2026-12-02)."""
    rng = random.Random(seed)
    used: set[str] = set(exclude)
    rivers = [_name(rng, (2, 2), used) for _ in range(max(8, n_places // 4))]
    places = []
    for _ in range(n_places):
        places.append(
            {
                "name": _name(rng, (2, 3), used),
                "region": rng.choice(REGIONS),
                "river": "the " + rng.choice(rivers),
                "founded": rng.randint(900, 1600),
            }
        )
    people = []
    for _ in range(n_people):
        full = f"{_name(rng, (1, 2), used)} {_name(rng, (2, 2), used)}"
        people.append(
            {
                "name": full,
                "born_in": rng.choice(places)["name"],
                "born": rng.randint(1700, 1900),
                "occupation": rng.choice(OCCUPATIONS),
            }
        )
    orgs = []
    for _ in range(n_orgs):
        founder = rng.choice(people)
        orgs.append(
            {
                "name": f"{_name(rng, (2, 3), used)} {rng.choice(ORG_KINDS)}",
                "founder": founder["name"],
                "headquarters": rng.choice(places)["name"],
                "founded": founder["born"] + rng.randint(20, 50),
                "field": rng.choice(FIELDS),
            }
        )
    for person in people:
        person["employer"] = rng.choice(orgs)["name"]
    people += _namesakes(people, orgs, places, random.Random(f"{seed}:namesakes"), namesakes)

    documents, facts = [], {}
    for p in places:
        text = (
            f"{p['name']} is a town in {p['region']}, on the river {p['river'][4:]}. "
            f"It was founded in {p['founded']}. Its market is known across {p['region']}."
        )
        documents.append(Document(_doc_id(p["name"]), p["name"], text, "place"))
        facts[p["name"]] = {"kind": "place", **p}
    for o in orgs:
        text = (
            f"The {o['name']} is an organisation in {o['field']}, founded in {o['founded']} by {o['founder']}. "
            f"Its headquarters are in {o['headquarters']}."
        )
        documents.append(Document(_doc_id(o["name"]), o["name"], text, "organisation"))
        facts[o["name"]] = {"kind": "organisation", **o}
    for p in people:
        text = (
            f"{p['name']} (born {p['born']}) was {_article(p['occupation'])} {p['occupation']} born in {p['born_in']}. "
            f"{p['name'].split()[0]} worked for the {p['employer']}."
        )
        title = p.get("title", p["name"])
        documents.append(Document(_doc_id(title), title, text, "person"))
        facts[title] = {"kind": "person", **p}
    documents.sort(key=lambda d: d.doc_id)
    return Corpus(documents=documents, facts=facts, names=frozenset(used - set(exclude)))


def _namesakes(
    people: list[dict], orgs: list[dict], places: list[dict], rng: random.Random, share: float
) -> list[dict]:
    """Namesakes: for some people who founded nothing (no page names them), another person of the
    same name and another occupation. Both articles are then titled "Name (occupation)", and a
    question about either names the occupation ("the composer Ilse Marrow"): a search for the
    name finds both, in an order the world decides, and only the detail the question states
    tells them apart. Drawn from a random generator of their own, after every other draw, so the
    rest of the world is as it was without them."""
    founders = {o["founder"] for o in orgs}
    added = []
    for person in people:
        if person["name"] in founders or rng.random() >= share:
            continue
        occupation = rng.choice([o for o in OCCUPATIONS if o != person["occupation"]])
        river = next(p["river"] for p in places if p["name"] == person["born_in"])
        founder = next(o["founder"] for o in orgs if o["name"] == person["employer"])
        twin = {  # no answer of the twin's is the person's: reading the wrong page is never right
            "name": person["name"],
            "born_in": rng.choice([p for p in places if p["river"] != river] or places)["name"],
            "born": rng.randint(1700, 1900),
            "occupation": occupation,
            "employer": rng.choice([o for o in orgs if o["founder"] != founder] or orgs)["name"],
            "decoy": True,
        }
        for p in (person, twin):
            p["title"] = f"{p['name']} ({p['occupation']})"
        added.append(twin)
    return added


def _doc_id(title: str) -> str:
    return hashlib.sha256(title.encode()).hexdigest()[:10]


def _split_of(entity: str, seed: int) -> str:
    u = int(hashlib.sha256(f"{seed}:split:{entity}".encode()).hexdigest()[:8], 16) / 16**8
    return "train" if u < 0.7 else ("dev" if u < 0.8 else "eval")


def generate_tasks(corpus: Corpus, *, seed: int = 0) -> list[TaskSpec]:
    """Every question the corpus supports, each with its answer and the articles holding it."""
    f = corpus.facts
    tasks = []

    def add(qtype, hops, entity, question, answer, evidence):
        tasks.append(
            TaskSpec(
                f"enc-{seed}-{qtype}-{_doc_id(entity)}",
                question,
                answer,
                qtype,
                hops,
                _split_of(entity, seed),
                entity,
                evidence,
            )
        )

    for name, o in f.items():
        if o["kind"] == "organisation":
            founder = f[o["founder"]]
            add("org_founder", 1, name, f"Who founded the {name}?", founder["name"], [name])
            add(
                "org_founder_birthplace",
                2,
                name,
                f"In which town was the founder of the {name} born?",
                founder["born_in"],
                [name, founder["name"]],
            )
    for name, p in f.items():
        if p["kind"] == "person" and not p.get("decoy"):
            # A person with a namesake is asked about with the detail that tells the two apart.
            who = f"the {p['occupation']} {p['name']}" if "title" in p else name
            add("person_birthplace", 1, name, f"In which town was {who} born?", p["born_in"], [name])
            add(
                "person_birthplace_river",
                2,
                name,
                f"On which river is the town where {who} was born?",
                f[p["born_in"]]["river"],
                [name, p["born_in"]],
            )
            add(
                "person_employer_founder",
                2,
                name,
                f"Who founded the organisation {who} worked for?",
                f[p["employer"]]["founder"],
                [name, p["employer"]],
            )
    tasks.sort(key=lambda t: t.external_id)
    return tasks


def save_jsonl(path: Path, rows) -> None:
    with path.open("w") as out:
        for row in rows:
            out.write(json.dumps(asdict(row), sort_keys=True) + "\n")


class CorpusFileError(ValueError):
    """A user's corpus or question file has bad lines; `problems` lists them by number."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems[:10]) + (" ..." if len(problems) > 10 else ""))
        self.problems = problems


def _jsonl_objects(path: Path, fields: tuple[str, ...], problems: list[str]):
    """(line number, object) for each line that is an object with these string fields;
    every other non-blank line adds its number and reason to `problems`."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"line {number}: invalid JSON ({exc.msg})")
                continue
            if not isinstance(obj, dict) or not all(isinstance(obj.get(f), str) for f in fields):
                problems.append(f"line {number}: expected an object with string fields {' and '.join(fields)}")
                continue
            yield number, obj


def load_corpus_jsonl(path: Path) -> Corpus:
    """User corpus: one {"title", "text"} object per line. Every bad line is reported."""
    documents, problems, seen = [], [], set()
    for number, obj in _jsonl_objects(path, ("title", "text"), problems):
        if obj["title"] in seen:
            problems.append(f"line {number}: duplicate title {obj['title']!r}")
            continue
        seen.add(obj["title"])
        documents.append(Document(_doc_id(obj["title"]), obj["title"], obj["text"], obj.get("kind", "page")))
    if problems:
        raise CorpusFileError(problems)
    if not documents:
        raise CorpusFileError(["the file holds no documents"])
    return Corpus(documents=sorted(documents, key=lambda d: d.doc_id))


def load_tasks_jsonl(path: Path, *, seed: int = 0) -> list[TaskSpec]:
    """User questions: one {"question", "answer"} per line (optional id, split, evidence)."""
    tasks, problems = [], []
    for number, obj in _jsonl_objects(path, ("question", "answer"), problems):
        split = obj.get("split") or _split_of(obj["question"], seed)
        if split not in ("train", "dev", "eval"):
            problems.append(f"line {number}: split must be train, dev or eval")
            continue
        tasks.append(
            TaskSpec(
                obj.get("id") or f"user-{_doc_id(obj['question'])}",
                obj["question"],
                obj["answer"],
                "user",
                int(obj.get("hops", 1)),
                split,
                obj["question"],
                list(obj.get("evidence", [])),
            )
        )
    if problems:
        raise CorpusFileError(problems)
    return tasks


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"
