"""EP converges, without NaN or exception, on every MQ2008 query (784): all pairs, and 100-200
random known pairs (the checks and the prior of ``test_ep_real_data.py``, which runs OHSUMED)."""

import pytest
from test_ep_real_data import all_pairs, queries_of, random_100_to_200_pairs

pytestmark = [pytest.mark.shared_data, pytest.mark.slow]


@pytest.fixture(scope="module")
def collection(shared_data):
    return queries_of(shared_data, "MQ2008")


def test_all_pairs(collection):
    all_pairs(collection)


def test_random_100_to_200_pairs(collection):
    random_100_to_200_pairs(collection)
