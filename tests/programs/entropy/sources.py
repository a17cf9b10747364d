"""Every source of entropy a program commonly draws from, one line each."""

import os
import random
import secrets
import uuid

import numpy as np

print("random", random.random(), random.choice("abcdefgh"), random.sample(range(100), 3))
print("Random()", random.Random().random())
random.seed()
print("random.seed()", random.random())
print("SystemRandom", random.SystemRandom().random())
print("urandom", os.urandom(8).hex())
print("getrandom", os.getrandom(8).hex())
print("secrets", secrets.token_hex(8), secrets.randbelow(10**9))
print("uuid4", uuid.uuid4())
print("uuid1", uuid.uuid1())
print("hash", hash("node03"), hash(b"node03"))
print("set", list({f"node{i:02d}" for i in range(16)}))
print("numpy legacy", np.random.rand(), np.random.randint(10**9))
print("numpy default_rng", np.random.default_rng().integers(10**9))
