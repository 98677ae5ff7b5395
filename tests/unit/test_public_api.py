"""The public Python API is what it says: the names in __all__ exist and nothing else is promised."""
import clirace


def test_exports_resolve():
    for name in clirace.__all__:
        assert getattr(clirace, name) is not None, name


def test_errors_share_one_base_with_exit_codes():
    from clirace.errors import EXIT_INTERNAL, EXIT_USAGE, InternalError
    assert issubclass(clirace.SpecError, clirace.CliraceError)
    assert clirace.SpecError("x").exit_code == EXIT_USAGE
    assert InternalError("x").exit_code == EXIT_INTERNAL
    assert "bug in clirace" in InternalError("boom").paragraph()
