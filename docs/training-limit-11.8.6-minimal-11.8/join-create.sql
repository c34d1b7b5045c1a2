-- The tables of the join load of slap-pairs.sh (issue 16, goal 4): our own shop schema, not sysbench tables.
-- Deterministic rows from recursive CTEs, names and titles in utf8mb4 (unicode_ci, general_ci).
SET SESSION max_recursive_iterations = 100000;
CREATE TABLE customer (id INT PRIMARY KEY, name VARCHAR(60) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, country CHAR(2) NOT NULL, since DATE NOT NULL, KEY (country), KEY (name)) ENGINE=InnoDB;
CREATE TABLE product (id INT PRIMARY KEY, title VARCHAR(80) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, category SMALLINT NOT NULL, price DECIMAL(8,2) NOT NULL, KEY (category)) ENGINE=InnoDB;
CREATE TABLE purchase (id INT PRIMARY KEY, customer_id INT NOT NULL, placed DATE NOT NULL, state ENUM('open','paid','shipped','returned') NOT NULL, KEY (customer_id), KEY (placed)) ENGINE=InnoDB;
CREATE TABLE purchase_line (purchase_id INT NOT NULL, line SMALLINT NOT NULL, product_id INT NOT NULL, quantity SMALLINT NOT NULL, PRIMARY KEY (purchase_id, line), KEY (product_id)) ENGINE=InnoDB;
INSERT INTO customer WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) SELECT i, CONCAT(ELT(1 + i % 7, 'Ågren', 'Müller', 'Øster', 'Šimek', 'Łukasz', 'Ñúñez', 'Zoë'), ' ', i * 7919 % 3001), ELT(1 + i % 5, 'SE', 'DE', 'NO', 'CZ', 'PL'), '2020-01-01' + INTERVAL i % 1500 DAY FROM n;
INSERT INTO product WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 800) SELECT i, CONCAT('Artikel ', ELT(1 + i % 4, 'größe', 'café', 'naïve', 'smörgås'), ' ', i), i % 40, 1 + (i * 37 % 500) / 10 FROM n;
INSERT INTO purchase WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000) SELECT i, 1 + i * 7 % 3000, '2024-01-01' + INTERVAL i % 366 DAY, 1 + i % 4 FROM n;
INSERT INTO purchase_line WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 89999) SELECT 1 + i DIV 3, 1 + i % 3, 1 + i * 13 % 800, 1 + i % 5 FROM n;
