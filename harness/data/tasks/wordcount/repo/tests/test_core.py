from wordcount import count_words, top_words


def test_count_words_ignores_case():
    assert count_words("The the THE cat")["the"] == 3


def test_top_words_returns_n_items():
    text = "a a a b b c"
    assert top_words(text, 2) == [("a", 3), ("b", 2)]


def test_top_words_breaks_ties_alphabetically():
    assert top_words("b a", 2) == [("a", 1), ("b", 1)]


def test_count_words_accented_letters():
    assert count_words("café café")["café"] == 2
