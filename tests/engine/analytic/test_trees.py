"""A tree's expected tokens a cycle from acceptance by rank and depth: a chain is the
per-position model, the greedy tree is the best of its size, and a measured tree's yield is
what the model says from the same engine's counts."""

from __future__ import annotations

import itertools

import pytest

from engine.analytic import positions, trees

ACC = [[0.5, 0.2, 0.1], [0.3, 0.15], [0.2]]  # acc[d][r]: depth d + 1, rank r


def test_a_chain_is_the_per_position_model():
    curve = positions.Curve.of(positions.survival_from_conditional([0.5, 0.3, 0.2]))
    assert trees.expected_tokens(trees.chain(3), ACC) == pytest.approx(
        positions.tokens_per_cycle(curve, 3))


def test_a_node_survives_when_every_step_of_its_path_was_the_accepted_one():
    assert trees.survival((1, 0), ACC) == pytest.approx(0.2 * 0.3)
    assert trees.survival((0, 2), ACC) == 0.0  # no rank 2 at depth 2
    assert trees.survival((0, 0, 0, 0), ACC) == 0.0  # past the depths given
    paths = [(0,), (1,), (0, 0)]
    assert trees.expected_tokens(paths, ACC) == pytest.approx(1 + 0.5 + 0.2 + 0.15)


def all_trees(budget: int, depth: int = 3, width: int = 3):
    """Every tree of ``budget`` nodes over ranks < width and depth <= depth (brute force)."""
    nodes = [p for d in range(1, depth + 1) for p in itertools.product(range(width), repeat=d)]
    for chosen in itertools.combinations(nodes, budget):
        chosen_set = set(chosen)
        if all((len(p) == 1 or p[:-1] in chosen_set)
               and (p[-1] == 0 or p[:-1] + (p[-1] - 1,) in chosen_set) for p in chosen):
            yield list(chosen)


@pytest.mark.parametrize("budget", [1, 3, 5])
def test_the_greedy_tree_is_the_best_of_its_size(budget):
    best = max(trees.expected_tokens(t, ACC) for t in all_trees(budget))
    greedy = trees.best_tree(ACC, budget)
    assert len(greedy) == budget
    assert trees.expected_tokens(greedy, ACC) == pytest.approx(best)


def test_a_tree_beats_the_chain_of_the_same_budget_where_the_second_guess_is_good():
    assert (trees.expected_tokens(trees.best_tree(ACC, 3), ACC)
            > trees.expected_tokens(trees.chain(3), ACC))


def test_a_tree_is_read_as_a_link_writes_it():
    assert trees.parse("0;1;0.0") == [(0,), (1,), (0, 0)]
    assert trees.text(trees.parse("0.0; 0 ;1")) == "0;1;0.0"
    for bad, message in (("0;2", "elder siblings"), ("0;x", "not a path"), ("", "1 to 64")):
        with pytest.raises(ValueError, match=message):
            trees.parse(bad)


def test_the_slider_figures_price_a_tree_against_the_chain_of_as_many_drafts():
    fig = trees.figures([(0,), (1,), (0, 0)], ACC, lambda levels: 0.1 * levels,
                        lambda n: 1.0 + 0.05 * n)
    assert fig.tokens == pytest.approx(1 + 0.5 + 0.2 + 0.15)
    assert fig.cycle_cost == pytest.approx(0.2 + 1.15)  # two levels drafted, three verified
    assert fig.chain_tokens == pytest.approx(trees.expected_tokens(trees.chain(3), ACC))
    assert fig.chain_cycle_cost == pytest.approx(0.3 + 1.15)
    assert fig.survival == pytest.approx([0.5, 0.2, 0.15])


def test_rank_acceptance_counts_each_depth_over_the_cycles_that_reached_it():
    # (ranks the target's token had at each depth reached, drafts accepted)
    walks = [([0, 1], 1),     # depth 1 rank 0 accepted, depth 2 rank 1 not in the tree
             ([2], 0),        # depth 1 rank 2: rejected, the walk stopped
             ([None], 0),     # past the ranks counted
             ([0, 0, 0], 2)]  # two accepted, the third rank 0 reached as the target's token
    acc = trees.rank_acceptance(walks, depth=3, ranks=3)
    assert acc[0] == [2 / 4, 0.0, 1 / 4]
    assert acc[1] == [1 / 2, 1 / 2, 0.0]
    assert acc[2] == [1.0, 0.0, 0.0]
