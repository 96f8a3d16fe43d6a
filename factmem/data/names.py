"""The personas' names of generated logs: ``first_last`` from these lists, drawn without replacement
(:mod:`factmem.data.generate`). Order matters: a persona's name is picked by its index into the
product of the two lists, so changing them changes every generated log's bytes.
"""

__all__ = ["FIRST_NAMES", "LAST_NAMES"]

FIRST_NAMES = [
    "ava", "ben", "chloe", "dev", "elena", "farid", "grace", "hiro", "ines", "jonas", "kemi", "liam", "maya",
    "noah", "olga", "pablo", "quinn", "rosa", "sami", "tara", "umar", "vera", "wen", "xavier", "yara", "zane",
    "amir", "bea", "carlos", "dana", "emil", "freya", "goran", "hana", "ivan", "jade", "kai", "lena", "mateo",
    "nina", "omar", "priya", "rafael", "sofia", "theo", "uma", "viktor", "willa", "yusuf", "zoe",
]
LAST_NAMES = [
    "brooks", "costa", "dubois", "eriksen", "fischer", "garcia", "haddad", "ito", "jensen", "kowalski", "lopez",
    "moreau", "nakamura", "okafor", "petrov", "quist", "rossi", "silva", "tanaka", "ueda", "varga", "walsh",
    "xu", "yilmaz", "zhang", "abbott", "bauer", "chen", "diaz", "evans", "ferreira", "gupta", "hughes", "ivanova",
    "kim", "larsen", "mensah", "novak", "olsen", "park", "reyes", "schmidt", "torres", "vogel", "weber",
]
