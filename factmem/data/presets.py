"""The default predicate catalogue, archetypes and named presets of the generator.

Each preset is the default scenario (:func:`base_dict`) with a few overrides, and a one-line
statement of what it stresses (:data:`PRESETS`). :func:`churn_catalogue` holds fast-churn predicates
(values that change every two to three weeks); they are not in the default catalogue (adding them
there would change every preset's bytes) and are added by the ``realistic`` preset's overrides.

More personas for any preset: ``preset("drift").replace(personas=60)`` or
``generate("drift", seed=1, personas=60)`` (``factmem generate --preset drift --personas 60``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from factmem.data.scenario import Scenario
from factmem.errors import InputError

__all__ = ["CITIES", "JOBS", "COMPANIES", "LANGUAGES", "PETS", "PROJECTS", "CLUBS", "RELATIONSHIP", "CARS",
    "CUISINES", "DRINKS", "EDITORS", "GENRES", "WORKOUT", "AUTHORS", "HOBBIES", "DISLIKES", "EVENTS", "PEOPLE",
    "MOVIES", "TASKS", "ILLNESSES", "LUNCHES", "SIGHTS", "WEATHER", "BOOKS", "WORK_TASKS", "SERIES",
    "default_catalogue", "churn_catalogue", "default_archetypes", "base_dict", "PRESETS", "preset", "resolve"]

CITIES = [
    "Lisbon", "Berlin", "Toronto", "Osaka", "Nairobi", "Austin", "Lyon", "Krakow", "Melbourne", "Seoul",
    "Bogota", "Oslo", "Dublin", "Porto", "Denver", "Mumbai", "Cape Town", "Vienna", "Montreal", "Taipei",
    "Glasgow", "Valencia", "Helsinki", "Athens", "Prague", "Quito", "Hanoi", "Zurich", "Seattle", "Edinburgh",
]
JOBS = [
    "a nurse",
    "a software engineer",
    "a teacher",
    "an architect",
    "an accountant",
    "a graphic designer",
    "a chef",
    "a data analyst",
    "a pharmacist",
    "an electrician",
    "a journalist",
    "a product manager",
    "a lawyer",
    "a physiotherapist",
    "a translator",
    "a civil engineer",
    "a barista",
    "a photographer",
    "a veterinarian",
    "a research scientist",
    "a sales manager",
    "a librarian",
    "a pilot",
    "a social worker",
]
COMPANIES = [
    "Northwind", "Acme Labs", "Bluefin Health", "Copperleaf", "Driftwood Media", "Evergreen Bank",
    "Fjord Logistics", "Granite Systems", "Harbor Foods", "Ironbark Studio", "Juniper Energy", "Kestrel Air",
    "Lumen Schools", "Maple Robotics", "Nimbus Cloud", "Orchid Pharma", "Pinecone Games", "Quarry Works",
    "Redwood Legal", "Saffron Hotels", "Tidewater Port", "Umbra Security", "Vantage Retail", "Willow Care",
]
LANGUAGES = [
    "English", "Spanish", "Portuguese", "French", "German", "Japanese", "Korean", "Mandarin", "Swahili",
    "Polish", "Italian", "Dutch", "Greek", "Hindi", "Vietnamese", "Norwegian",
]
PETS = [
    "a dog named Biscuit", "a cat named Miso", "a parrot named Kiwi", "two goldfish", "a rabbit named Clover",
    "a dog named Pepper", "a cat named Luna", "a tortoise named Sheldon", "a hamster named Nibbles",
    "a dog named Scout", "a cat named Tofu", "a gecko named Zap",
]
PROJECTS = [
    "the website redesign", "the billing migration", "a mobile app", "the warehouse audit", "a grant proposal",
    "the onboarding guide", "a data pipeline", "the spring campaign", "a kitchen renovation", "a podcast",
    "the annual budget", "a customer survey", "the office move", "a training course", "a research paper",
    "the garden shed", "a wedding plan", "a board game prototype", "the quarterly roadmap", "a novel draft",
]
CLUBS = [
    "a running club", "a book club", "a chess club", "a choir", "a climbing gym", "a rowing club",
    "a film society", "a volunteer fire brigade", "a pottery studio", "a board game group", "a swim team",
    "a community garden",
]
RELATIONSHIP = ["single", "dating someone", "engaged", "married", "separated", "in a long-distance relationship"]
CARS = [
    "a Toyota Corolla", "a Volkswagen Golf", "a Tesla Model 3", "a Ford Focus", "a Honda Civic", "a Kia Niro",
    "a Subaru Outback", "a Mini Cooper", "a Renault Zoe", "a Volvo XC40", "a cargo bike", "no car",
]
CUISINES = [
    "Japanese", "Mexican", "Thai", "Italian", "Ethiopian", "Lebanese", "Indian", "Peruvian", "Korean",
    "Greek", "Vietnamese", "French", "Georgian", "Turkish",
]
DRINKS = ["black coffee", "green tea", "oat flat white", "espresso", "chai", "sparkling water", "rooibos", "hot chocolate", "matcha", "cold brew"]
EDITORS = ["VS Code", "Neovim", "Emacs", "IntelliJ", "Sublime Text", "Helix", "Zed", "plain Notepad"]
GENRES = ["jazz", "techno", "classical", "indie rock", "hip hop", "folk", "metal", "bossa nova", "k-pop", "ambient", "blues", "reggae"]
WORKOUT = ["early morning", "lunchtime", "late evening", "weekends only", "right after work", "before bed"]
AUTHORS = [
    "Ursula K. Le Guin", "Haruki Murakami", "Toni Morrison", "Terry Pratchett", "Chimamanda Ngozi Adichie",
    "Kazuo Ishiguro", "Octavia Butler", "Italo Calvino", "Jane Austen", "Ted Chiang", "Elena Ferrante", "Gabriel Garcia Marquez",
]
HOBBIES = [
    "hiking", "rock climbing", "cooking", "playing guitar", "mechanical keyboards", "gardening", "photography",
    "knitting", "cycling", "board games", "baking bread", "birdwatching", "chess", "sketching", "yoga",
    "woodworking", "surfing", "salsa dancing", "video games", "running", "kayaking", "calligraphy",
]
DISLIKES = [
    "cilantro", "olives", "mushrooms", "spicy food", "fast food", "blue cheese", "licorice", "raw onions",
    "seafood", "coconut", "eggplant", "anchovies",
]
EVENTS = [
    "a jazz concert", "a team offsite", "a friend's wedding", "a football match", "a pottery class", "a tech meetup",
    "a birthday party", "a museum opening", "a charity run", "a job interview", "a parent-teacher meeting",
    "a dentist appointment", "a comedy show", "a farmers market", "a hackathon", "a wine tasting",
]
PEOPLE = [
    "my sister", "an old colleague", "my landlord", "a recruiter", "my mentor", "the neighbours", "my cousin",
    "a college friend", "my manager", "the new intern", "my doctor", "my grandmother", "a client", "my coach",
]
MOVIES = [
    "Dune", "Spirited Away", "Arrival", "Amelie", "Parasite", "The Matrix", "Paddington 2", "Moonlight",
    "Casablanca", "Inception", "Coco", "Whiplash", "Roma", "Her", "Alien", "Up",
]
TASKS = [
    "the quarterly report", "a conference talk", "a client pitch", "the tax return", "a job application",
    "an exam", "a product launch", "a half marathon", "a house move", "a grant deadline",
]
ILLNESSES = ["a cold", "the flu", "a sprained ankle", "a migraine", "a back injury", "food poisoning", "a sore throat"]
LUNCHES = [
    "a falafel wrap", "leftover pasta", "a poke bowl", "ramen", "a cheese sandwich", "lentil soup", "sushi",
    "a burrito", "a salad", "dumplings", "pizza", "a banh mi",
]
SIGHTS = [
    "a red kite over the park", "a street musician", "a double rainbow", "a very fluffy dog", "roadworks again",
    "a vintage car", "a huge queue at the bakery", "a film crew downtown", "a lost balloon", "a fox in the garden",
]
WEATHER = ["rainy", "sunny", "foggy", "windy", "freezing", "humid", "stormy", "mild"]
# fast-churn vocabularies: large, so that a persona who changes value every two or three weeks
# still has values it never holds (room for extraction errors that are never true)
BOOKS = [
    "Middlemarch", "Dune", "Beloved", "The Remains of the Day", "Piranesi", "Station Eleven", "Circe",
    "The Overstory", "Pachinko", "Small Gods", "The Left Hand of Darkness", "Kindred", "Invisible Cities",
    "Normal People", "The Road", "Never Let Me Go", "Anxious People", "The Vanishing Half", "Educated",
    "Sapiens", "Atomic Habits", "Project Hail Mary", "The Name of the Rose", "Americanah", "A Gentleman in Moscow",
    "The Hobbit", "Klara and the Sun", "Braiding Sweetgrass", "The Night Circus", "Lincoln in the Bardo",
    "Homegoing", "The Secret History", "Exhalation", "The Dispossessed", "The Martian", "Shuggie Bain",
]
WORK_TASKS = [
    "fixing the login bug", "the Q3 slide deck", "migrating the database", "a vendor contract review",
    "hiring a new designer", "the release checklist", "cleaning up the backlog", "a customer escalation",
    "the budget spreadsheet", "writing test cases", "the API documentation", "a security audit",
    "the team offsite agenda", "onboarding a new colleague", "a pricing analysis", "the monthly newsletter",
    "refactoring the payment module", "a board presentation", "the inventory count", "a grant report",
    "updating the style guide", "the performance reviews", "a load test", "the holiday rota",
    "a data cleanup", "the supplier invoices", "a user interview round", "the shift schedule",
    "a proof of concept", "the accessibility fixes", "the year-end close", "a training workshop",
]
SERIES = [
    "Severance", "The Bear", "Succession", "Shogun", "Slow Horses", "The Crown", "Fleabag", "Dark",
    "Arcane", "Blue Eye Samurai", "Only Murders in the Building", "The Expanse", "Ted Lasso", "Andor",
    "Mare of Easttown", "Reservation Dogs", "Abbott Elementary", "The Last of Us", "Bluey", "Chernobyl",
    "Normal People", "Atlanta", "Derry Girls", "Ripley", "Hacks", "Beef", "Baby Reindeer", "Fargo",
    "Better Call Saul", "Mr Robot",
]


def _p(kind: str, values: list[str], templates: list[str], **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "values": list(values), "templates": list(templates), **kw}


def default_catalogue() -> dict[str, dict[str, Any]]:
    """The default predicate catalogue (plain dicts, ready to override)."""
    inf = math.inf
    return {
        # explicit, single-valued: biography that changes now and then
        "lives_in": _p("explicit", CITIES, ["I live in {o}.", "We moved to {o}, by the way.", "Things are busy here in {o}."],
                       lifetime_days=900.0, salience=0.06, change_delay_days=2.0, unmentioned_change=0.1),
        "works_as": _p("explicit", JOBS, ["I work as {o}.", "As {o}, I get a lot of that.", "My job? I'm {o}."],
                       lifetime_days=1200.0, salience=0.06, change_delay_days=3.0, unmentioned_change=0.1),
        "works_at": _p("explicit", COMPANIES, ["I work at {o}.", "I just started at {o}.", "Work at {o} is hectic."],
                       lifetime_days=700.0, salience=0.075, change_delay_days=2.0, unmentioned_change=0.15),
        "relationship_status": _p("explicit", RELATIONSHIP, ["I'm {o}.", "Right now I'm {o}."],
                                  lifetime_days=1100.0, salience=0.03, change_delay_days=7.0, unmentioned_change=0.2),
        "drives": _p("explicit", CARS, ["I drive {o}.", "I get around with {o}."],
                     lifetime_days=1400.0, salience=0.03, change_delay_days=5.0, unmentioned_change=0.2),
        "born_in": _p("explicit", CITIES, ["I was born in {o}.", "I grew up in {o}."], lifetime_days=inf, salience=0.015),
        # explicit, multi-valued
        "speaks": _p("explicit", LANGUAGES, ["I speak {o}.", "I can get by in {o}."], cardinality="multi",
                     max_values=3, lifetime_days=inf, salience=0.0225),
        "has_pet": _p("explicit", PETS, ["I have {o}.", "At home there's {o}."], cardinality="multi", max_values=2,
                      lifetime_days=1500.0, salience=0.06, change_delay_days=4.0, unmentioned_change=0.2),
        "works_on": _p("explicit", PROJECTS, ["I'm working on {o}.", "Most of my week goes into {o}."], cardinality="multi",
                       max_values=3, lifetime_days=90.0, salience=0.105, change_delay_days=1.0, unmentioned_change=0.1),
        "member_of": _p("explicit", CLUBS, ["I'm a member of {o}.", "I joined {o}."], cardinality="multi", max_values=2,
                        lifetime_days=600.0, salience=0.045, change_delay_days=3.0, unmentioned_change=0.15),
        # preferences: persist, change occasionally
        "favorite_cuisine": _p("user_preference", CUISINES, ["My favourite food is {o}.", "I could eat {o} every day."],
                               lifetime_days=400.0, salience=0.075, change_delay_days=3.0, unmentioned_change=0.1),
        "prefers_drink": _p("user_preference", DRINKS, ["I usually drink {o}.", "Nothing beats {o} in the morning."],
                            lifetime_days=300.0, salience=0.075, change_delay_days=2.0, unmentioned_change=0.1),
        "preferred_editor": _p("user_preference", EDITORS, ["I write everything in {o}.", "My editor of choice is {o}."],
                               lifetime_days=500.0, salience=0.06, change_delay_days=2.0, unmentioned_change=0.1),
        "favorite_music_genre": _p("user_preference", GENRES, ["I mostly listen to {o}.", "I'm really into {o} lately."],
                                   lifetime_days=350.0, salience=0.06, change_delay_days=3.0, unmentioned_change=0.15),
        "preferred_workout_time": _p("user_preference", WORKOUT, ["I like to work out {o}.", "My workouts are {o}."],
                                     lifetime_days=200.0, salience=0.045, change_delay_days=3.0, unmentioned_change=0.2),
        "favorite_author": _p("user_preference", AUTHORS, ["My favourite author is {o}.", "I keep rereading {o}."],
                              lifetime_days=500.0, salience=0.03, change_delay_days=5.0, unmentioned_change=0.2),
        "enjoys": _p("user_preference", HOBBIES, ["I enjoy {o}.", "I spent the weekend on {o}.", "I'm into {o}."],
                     cardinality="multi", max_values=4, lifetime_days=500.0, salience=0.075, change_delay_days=3.0,
                     unmentioned_change=0.15),
        "dislikes": _p("user_preference", DISLIKES, ["I can't stand {o}.", "Please, no {o}."], cardinality="multi",
                       max_values=3, lifetime_days=1000.0, salience=0.045, change_delay_days=3.0, unmentioned_change=0.2),
        # episodic: fade fast
        "attended": _p("episodic", EVENTS, ["I went to {o}.", "I was at {o} yesterday."], cardinality="multi",
                       rate_per_year=12.0, relevance_days=3.0, salience=0.3),
        "met_with": _p("episodic", PEOPLE, ["I met {o} today.", "Had coffee with {o}."], cardinality="multi",
                       rate_per_year=24.0, relevance_days=2.0, salience=0.3),
        "watched": _p("episodic", MOVIES, ["I watched {o} last night.", "Just saw {o}."], cardinality="multi",
                      rate_per_year=20.0, relevance_days=1.5, salience=0.25),
        "is_travelling_to": _p("episodic", CITIES, ["I'm travelling to {o} this week.", "I'm off to {o} soon."],
                               episode="state", rate_per_year=6.0, relevance_days=6.0, salience=0.5),
        "is_preparing": _p("episodic", TASKS, ["I'm preparing {o}.", "Still stressing about {o}."],
                           episode="state", rate_per_year=8.0, relevance_days=10.0, salience=0.4),
        "is_recovering_from": _p("episodic", ILLNESSES, ["I'm recovering from {o}.", "Still not over {o}."],
                                 episode="state", rate_per_year=3.0, relevance_days=5.0, salience=0.4),
        # one-off noise: true, never needed again
        "had_for_lunch": _p("episodic", LUNCHES, ["I had {o} for lunch.", "Lunch was {o}."], irrelevant=True,
                            cardinality="multi", salience=0.0),
        "noticed": _p("episodic", SIGHTS, ["On the way I saw {o}.", "Funny, I noticed {o}."], irrelevant=True,
                      cardinality="multi", salience=0.0),
        "weather_was": _p("episodic", WEATHER, ["It was {o} today.", "Ugh, so {o} out."], irrelevant=True,
                          cardinality="multi", salience=0.0),
    }


def churn_catalogue() -> dict[str, dict[str, Any]]:
    """Fast-churn predicates: a value holds two to three weeks on average (exponential lifetimes).

    Often mentioned while they hold (salience 0.12-0.15), first mentioned about a day after a
    change, and one change in ten never mentioned: a memory that keeps them too long fills a
    budgeted context with stale values. Not part of :func:`default_catalogue`.
    """
    return {
        "currently_reading": _p("explicit", BOOKS, ["I'm reading {o} at the moment.", "Just started {o}.",
                                                    "I'm halfway through {o}."],
                                lifetime_days=21.0, salience=0.12, change_delay_days=1.0, unmentioned_change=0.1),
        "working_on_task": _p("explicit", WORK_TASKS, ["This week I'm on {o}.", "Today it's {o} again.",
                                                       "My main task right now is {o}."],
                              lifetime_days=14.0, salience=0.15, change_delay_days=1.0, unmentioned_change=0.1),
        "current_show": _p("user_preference", SERIES, ["I'm hooked on {o} right now.", "Can't stop watching {o}."],
                           lifetime_days=18.0, salience=0.12, change_delay_days=1.0, unmentioned_change=0.1),
    }


def default_archetypes() -> dict[str, dict[str, Any]]:
    return {
        "outdoors": {"share": 0.15, "object": "outdoors enthusiast", "note": "spends free time outside",
                     "implies": [["enjoys", "hiking"], ["enjoys", "rock climbing"], ["member_of", "a climbing gym"],
                                 ["preferred_workout_time", "early morning"]]},
        "coder": {"share": 0.15, "object": "software developer", "note": "writes code for a living",
                  "implies": [["works_as", "a software engineer"], ["preferred_editor", "Neovim"],
                              ["enjoys", "mechanical keyboards"], ["prefers_drink", "espresso"]]},
        "foodie": {"share": 0.1, "object": "food lover", "note": "cooks and eats adventurously",
                   "implies": [["enjoys", "cooking"], ["favorite_cuisine", "Georgian"], ["dislikes", "fast food"]]},
        "musician": {"share": 0.1, "object": "amateur musician", "note": "plays and listens a lot",
                     "implies": [["enjoys", "playing guitar"], ["favorite_music_genre", "jazz"], ["member_of", "a choir"]]},
    }


def base_dict() -> dict[str, Any]:
    """The default scenario as a plain dict (before any preset)."""
    return {
        "name": "custom", "description": "", "seed": 0, "start": 1704067200, "days": 90, "personas": 8,
        "sessions": {}, "messages": {}, "noise": {},
        "predicates": default_catalogue(), "archetypes": default_archetypes(),
    }


def _merge(base: dict, over: Mapping[str, Any]) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _scale(preds: dict, kind: str, key: str, factor: float, **only: Any) -> dict:
    """Overrides multiplying ``key`` of every predicate of ``kind`` (matching ``only``)."""
    return {
        n: {key: p[key] * factor}
        for n, p in preds.items()
        if p["kind"] == kind and not p.get("irrelevant") and key in p and all(p.get(a, None) == b for a, b in only.items())
    }


def _conversation(cat: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``conversation`` preset's overrides: 20 people in 10 pairs (one group each) over eight
    months; a pair talks every ~8 days on average (median gap ~6 days, no bursts); a lasting fact comes
    up again in a session with a twelfth of its default salience (a few dozen repeated mentions of
    lasting facts in the whole log: the gain has little to act on); episodes come three times as often,
    are re-mentioned a sixth as often and stay relevant eight times as long (weeks: what a later session
    asks about), so they are most of what is needed; two remarks said in passing per session (true,
    never needed)."""
    lasting = {n: {"salience": p["salience"] / 12} for n, p in cat.items()
               if p["kind"] != "episodic" and not p.get("irrelevant")}
    episodes = {n: {"rate_per_year": p["rate_per_year"] * 3, "relevance_days": p["relevance_days"] * 8,
                    "salience": p["salience"] / 6}
                for n, p in cat.items() if p["kind"] == "episodic" and not p.get("irrelevant")}
    return {"days": 240, "personas": 20,
            "sessions": {"rate_per_day": 0.115, "rate_spread": 0.3, "weekend_factor": 1.0, "bursts_per_year": 0.0,
                         "absences_per_year": 0.5, "absence_days": 14.0, "shared_by": 2},
            "messages": {"facts_per_message": 2},
            "noise": {"irrelevant_per_session": 2.0},
            "predicates": {**lasting, **episodes}}


def _preset_dicts() -> dict[str, tuple[str, dict[str, Any]]]:
    cat = default_catalogue()
    return {
        "tiny": ("a few personas over six weeks: for tests, generates in well under a second",
                 {"days": 42, "personas": 6, "sessions": {"rate_per_day": 1.5}}),
        "small": ("the default tuning log: 40 personas over nine months, every mechanism at moderate strength",
                  {"days": 270, "personas": 40, "sessions": {"rate_per_day": 1.2},
                   "messages": {"assistant_replies": False, "facts_per_message": 3}}),
        "drift": ("preferences that change every few weeks: stresses supersession and how fast beliefs follow",
                  {"days": 180, "personas": 16, "sessions": {"rate_per_day": 1.2},
                   # one override per preference: lifetime × 0.08 together with the faster announcement
                   # (two dicts unpacked into one would let the second replace the first, lifetimes lost)
                   "predicates": {n: {**over, "change_delay_days": 1.0, "unmentioned_change": 0.1}
                                  for n, over in _scale(cat, "user_preference", "lifetime_days", 0.08).items()}}),
        "episodic-flood": ("many short-lived episodes and one-off chatter: stresses fast decay and context pressure",
                           {"days": 120, "personas": 16, "sessions": {"rate_per_day": 1.5},
                            "noise": {"irrelevant_per_session": 1.5},
                            "predicates": _scale(cat, "episodic", "rate_per_year", 8.0)}),
        "multi-valued": ("several true values at once (projects, hobbies, languages, clubs): stresses the cost of "
                         "single-valued supersession",
                         {"days": 180, "personas": 16, "sessions": {"rate_per_day": 1.2},
                          "predicates": {
                              "works_on": {"max_values": 5, "salience": 0.1},
                              "enjoys": {"max_values": 6},
                              "speaks": {"max_values": 4, "salience": 0.04},
                              "member_of": {"max_values": 4, "salience": 0.05},
                              "works_at": {"cardinality": "multi", "max_values": 2},
                              "lives_in": {"cardinality": "multi", "max_values": 2, "salience": 0.05},
                          }}),
        "long-absence": ("personas who vanish for months and come back: stresses decay over long gaps (forgetting regret)",
                         {"days": 365, "personas": 16, "sessions": {"rate_per_day": 1.2, "absences_per_year": 2.5,
                                                                    "absence_days": 45.0}}),
        "realistic": ("10% of extracted facts wrong and never corrected, plus facts that change every two to three "
                      "weeks: stresses keeping what will be needed while keeping stale and false facts out of a "
                      "budgeted context",
                      {"days": 270, "personas": 40, "sessions": {"rate_per_day": 1.2},
                       "messages": {"assistant_replies": False, "facts_per_message": 3},
                       "noise": {"extraction_rate": 0.1},
                       "predicates": churn_catalogue()}),
        "conversation": ("the structure of real multi-session conversations: pairs of people talking in the same "
                         "sessions about a week apart, lasting facts rarely said twice, episodes that stay relevant "
                         "for weeks and are most of what is needed, and much said in passing that is never needed "
                         "again: stresses decisions (references, groups) on data where the seed's numbers are weak",
                         _conversation(cat)),
        "large": (">= 1M mentions for benchmarks (not committed; generate on demand)",
                  {"days": 365, "personas": 900, "sessions": {"rate_per_day": 2.0},
                   "messages": {"assistant_replies": False}}),
    }


PRESETS: dict[str, str] = {name: desc for name, (desc, _) in _preset_dicts().items()}
"""Preset names and the one line saying what each stresses."""


def preset(name: str, seed: int | None = None) -> Scenario:
    """The scenario of a named preset (see :data:`PRESETS`), optionally with another seed."""
    presets = _preset_dicts()
    if name not in presets:
        raise InputError(f"unknown preset {name!r}; presets: {', '.join(presets)}")
    desc, over = presets[name]
    d = _merge(base_dict(), {"name": name, "description": desc, **over})
    if seed is not None:
        d["seed"] = seed
    return Scenario.from_dict(d)


def resolve(spec: str | Path | Mapping[str, Any] | Scenario) -> Scenario:
    """A Scenario from a preset name, a scenario TOML path, a plain dict or a Scenario."""
    if isinstance(spec, Scenario):
        return spec
    if isinstance(spec, Mapping):
        return Scenario.from_dict(spec)
    if isinstance(spec, Path) or (isinstance(spec, str) and (spec.endswith(".toml") or "/" in spec)):
        return Scenario.load(spec)
    if isinstance(spec, str):
        return preset(spec)
    raise InputError(f"expected a preset name, a scenario file, a dict or a Scenario, got {spec!r}")
