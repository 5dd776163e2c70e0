import pytest

from pagination import PageOutOfRange, page_count, paginate


def test_page_count_with_partial_last_page():
    assert page_count(21, 10) == 3


def test_empty_list_has_one_empty_page():
    page = paginate([], 1)
    assert page.items == [] and page.total_pages == 1


def test_first_page_items():
    page = paginate(list(range(25)), 1, per_page=10)
    assert page.items == list(range(10))
    assert page.has_next and not page.has_previous


def test_page_zero_is_out_of_range():
    with pytest.raises(PageOutOfRange):
        paginate([1, 2, 3], 0)
