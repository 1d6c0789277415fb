"""What the tests share: helpers, fakes and fixtures that test modules import."""
