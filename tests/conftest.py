pytest_plugins = ["tests.fixtures.pg", "tests.fixtures.neo4j", "tests.fixtures.mesh", "tests.fixtures.llm", "tests.fixtures.fake_gateway", "tests.fixtures.models"]
