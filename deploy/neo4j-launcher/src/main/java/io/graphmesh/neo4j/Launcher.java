package io.graphmesh.neo4j;

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.ConnectorPortRegister;
import org.neo4j.configuration.connectors.ConnectorType;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.kernel.internal.GraphDatabaseAPI;

/**
 * Runs Neo4j Community embedded with Bolt on 127.0.0.1 until SIGTERM.
 *
 * <p>Usage: {@code java -cp ... io.graphmesh.neo4j.Launcher DATA_DIR BOLT_PORT}. The server listens
 * on loopback only. When the environment variable {@code GRAPHMESH_NEO4J_PASSWORD} is set (8 or
 * more characters), authentication is on and user {@code neo4j} gets that password at every
 * start (so a password kept with the stack's state always opens it); without it authentication
 * is off, for throwaway test stores. A BOLT_PORT of 0 lets the server bind a free port itself. Prints {@code NEO4J_READY
 * bolt://127.0.0.1:PORT} on stdout, with the port actually bound, once Bolt accepts connections.
 */
public final class Launcher {
  private Launcher() {}

  public static void main(String[] args) throws InterruptedException {
    if (args.length != 2) {
      System.err.println("usage: Launcher DATA_DIR BOLT_PORT");
      System.exit(2);
    }
    Path home = Path.of(args[0]).toAbsolutePath();
    int boltPort = Integer.parseInt(args[1]);
    String password = System.getenv("GRAPHMESH_NEO4J_PASSWORD");
    boolean auth = password != null && !password.isEmpty();
    if (auth && password.length() < 8) {
      System.err.println("GRAPHMESH_NEO4J_PASSWORD must be at least 8 characters");
      System.exit(2);
    }

    DatabaseManagementService service =
        new DatabaseManagementServiceBuilder(home)
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", boltPort))
            .setConfig(BoltConnector.advertised_address, new SocketAddress("127.0.0.1", boltPort))
            .setConfig(HttpConnector.enabled, false)
            .setConfig(GraphDatabaseSettings.auth_enabled, auth)
            .setConfig(GraphDatabaseSettings.pagecache_memory, 256L * 1024 * 1024)
            .setConfig(GraphDatabaseSettings.shutdown_transaction_end_timeout, Duration.ofSeconds(5))
            .build();
    if (auth) {
      // Embedded transactions are not subject to Bolt authentication; the
      // system database holds the users.
      try {
        service
            .database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME)
            .executeTransactionally(
                "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED",
                java.util.Map.of("password", password));
      } catch (org.neo4j.graphdb.QueryExecutionException e) {
        // A restart with the same password: it is set already.
        if (e.getMessage() == null || !e.getMessage().contains("cannot be the same")) {
          throw e;
        }
      }
    }
    GraphDatabaseAPI db =
        (GraphDatabaseAPI) service.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
    int bound =
        db.getDependencyResolver()
            .resolveDependency(ConnectorPortRegister.class)
            .getLocalAddress(ConnectorType.BOLT)
            .getPort();

    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  service.shutdown();
                  stopped.countDown();
                }));
    System.out.println("NEO4J_READY bolt://127.0.0.1:" + bound);
    System.out.flush();
    stopped.await();
  }
}
