from textkit import slugify


def test_punctuation_becomes_one_separator():
    assert slugify("Hello, World!") == "hello-world"


def test_custom_separator():
    assert slugify("Release notes 2024", sep="_") == "release_notes_2024"


def test_max_length_does_not_leave_trailing_separator():
    assert slugify("abc def", max_length=4) == "abc"
